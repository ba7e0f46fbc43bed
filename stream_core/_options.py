"""Per-call options, shared by every provider."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx
from pydantic import BaseModel

from ._checks import SECRET_HEADERS, base_url_problem, clip, header_problem, key_problem
from ._decoding.sse import DEFAULT_MAX_EVENT_BYTES

if typing.TYPE_CHECKING:
    from ._models import Model

__all__ = [
    "CONTROLS",
    "copy_controls",
    "refuse_forced_tool",
    "PayloadHook",
    "ReasoningEffort",
    "StreamOptions",
    "THINKING_BUDGETS",
    "ToolChoice",
]

ReasoningEffort = Literal["minimal", "low", "medium", "high"]
"""How hard a reasoning model should think (`StreamOptions.reasoning`); each API turns it into
its own effort level or a token budget (`THINKING_BUDGETS`)."""
PayloadHook = typing.Callable[[dict[str, Any], "Model"], "dict[str, Any] | None"]
"""`on_payload(payload, model)`: called with the request body about to be sent and the model;
return a dict to send that instead, or None to send `payload` (changed in place or not)."""
ToolChoice = Literal["auto", "none", "required"] | dict[str, str]
"""`"auto"` (the model decides), `"none"` (no tool call), `"required"` (at least one call,
any tool) or `{"tool": name}` (exactly that tool)."""

CONTROLS = (
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "top_p",
    "top_k",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "output_schema",
)
"""The portable request controls: each API maps them to its own field, or raises at
`stream()` naming the control and the API (`WireAPI.controls`)."""

THINKING_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
"""Default thinking-token budget per effort, for vendors that take a budget."""


@dataclass(kw_only=True, slots=True)
class StreamOptions:
    """Everything a call may tune. Every field is optional.

    Timeouts are in seconds and separate: `connect_timeout` (TCP/TLS), `pool_timeout` (the
    wait for a free connection, when the pool has a limit), `first_byte_timeout`
    (request sent to response headers), `idle_timeout` (silence between two chunks of the
    body), `total_timeout` (the whole call, retries included: off by default). None
    disables one.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    """Output limit; defaults to the model's `max_tokens` (Anthropic requires one)."""
    api_key: str | None = field(default=None, repr=False)
    """Else the provider's environment variable."""
    headers: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    """Send this call here instead of `model.base_url` (a gateway, a proxy, a local server)."""
    client: httpx.AsyncClient | None = None
    """Use this client (connection pool, proxies, a mock transport) instead of the keep-alive
    client shared by calls on the same event loop; its default headers are sent too. It is
    never closed by the stream."""
    cancel: anyio.Event | None = None
    """Set it to abort: the response is closed and the message ends `aborted`."""
    connect_timeout: float | None = 10.0
    pool_timeout: float | None = 30.0
    """The longest wait for a free connection when the pool has a limit (an injected
    client's, or `configure_connections(max_connections=...)`; the shared client has none
    by default). Past it the call ends `timeout`, "connection pool full: N in use", and is
    not retried: a retry would only queue again behind the same streams."""
    first_byte_timeout: float | None = 300.0
    idle_timeout: float | None = 120.0
    total_timeout: float | None = None
    """The whole call, from the first read of the stream to `message_end`, backoff and
    retries included; at the deadline it ends `timeout` with what arrived. None (the
    default): no bound, as a long answer may legitimately stream for many minutes."""
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    """The most one SSE line or event, NDJSON line or event-stream frame may hold (8 MiB).
    A body that grows one past it ends the stream `protocol` ("line over N bytes"), with
    the content that arrived before it kept; memory stays bounded whatever the server
    sends. (AWS frames are capped at 16 MiB by their format in any case.)"""
    max_retries: int = 2
    max_retry_delay: float = 60.0
    """A vendor asking to wait longer than this fails at once, with `retry_after` set."""
    retry_backoff: float = 0.5
    """First backoff delay; doubled per attempt, with jitter."""
    reasoning: ReasoningEffort | None = None
    """Ask for thinking at this effort (ignored by models without reasoning)."""
    thinking_budgets: dict[str, int] = field(default_factory=dict)
    """Override `THINKING_BUDGETS` per effort."""
    cache_retention: Literal["none", "short", "long"] = "short"
    session_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    on_payload: PayloadHook | None = None
    """`on_payload(payload, model)`, called with the request body about to be sent; return a
    dict to send that instead, or None to send `payload` as it is (changed in place or not).
    A hook that cannot take those two arguments raises at `stream()`."""
    budget: str | None = None
    """Draw this call's cost from the named budget of `configure_limits(budgets=...)` (an
    unknown name raises at `stream()`); see the many-workers guide."""
    max_cost_usd: float | None = None
    """The most this call may cost: one whose worst case (estimated input and `max_tokens`
    of output at the model's prices) is more ends at once with kind `budget`, unsent."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Vendor-only knobs, each provider's own (`WireAPI.extra` lists them); an unknown key
    raises at `stream()`."""

    # --- portable request controls (README: "Request controls") ---------------------------
    tool_choice: ToolChoice | None = None
    """`"auto"`, `"none"`, `"required"` or `{"tool": name}`; None: the vendor's default
    (auto when tools are given)."""
    parallel_tool_calls: bool | None = None
    """False: at most one tool call per turn (where the API can say so). True is every
    API's default behaviour; None sends nothing."""
    stop: list[str] | None = None
    """Stop sequences: generation ends before any of them."""
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    output_schema: dict[str, Any] | type[BaseModel] | None = None
    """Ask for a JSON answer matching this JSON Schema (a dict) or pydantic model class. The
    final message's `output` holds the parsed value (an instance of the class, when one was
    given) and `output_mode` says how it was asked for."""

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if (
                not f.repr
                or value == f.default
                or (f.default_factory is not dataclasses.MISSING and value == f.default_factory())
            ):
                continue
            if f.name == "headers":
                value = {
                    k: ("[redacted]" if k.lower() in SECRET_HEADERS else v)
                    for k, v in value.items()
                }
            shown.append(f"{f.name}={value!r}")
        if self.api_key is not None:
            shown.append("api_key=[redacted]")
        return f"StreamOptions({', '.join(shown)})"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise TypeError/ValueError naming the first bad field (run when the options are
        made, and again by `stream()`, which catches a field changed afterwards)."""
        for f in dataclasses.fields(self):
            check = _CHECKS.get(f.name)
            if check is not None:
                problem = check(getattr(self, f.name))
                if problem is not None:
                    error, text = problem
                    raise error(f"StreamOptions.{f.name}: {text}")

    def thinking_budget(self) -> int | None:
        if self.reasoning is None:
            return None
        return self.thinking_budgets.get(self.reasoning, THINKING_BUDGETS[self.reasoning])


# --- validation -----------------------------------------------------------------------------
# One checker per field: None when the value is fine, else (exception class, reason).
# Strict on purpose: `max_tokens="100"` is a bug in the caller, not something to coerce.

_EFFORTS: tuple[str, ...] = typing.get_args(ReasoningEffort)


def _shown(value: Any) -> str:
    return clip(repr(value), 60)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _isfinite(value: float) -> bool:
    """`math.isfinite`, False for an int past a float's range (it cannot be sent as one;
    `math.isfinite` raises OverflowError on it)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _number(*, minimum: float, allow_equal: bool, optional: bool) -> Any:
    bound = f">= {minimum:g}" if allow_equal else f"> {minimum:g}"

    def check(value: Any) -> tuple[type[Exception], str] | None:
        if value is None and optional:
            return None
        if not _is_number(value):
            return TypeError, f"expected a number, got {type(value).__name__} {_shown(value)}"
        if not _isfinite(value) or (value < minimum if allow_equal else value <= minimum):
            return ValueError, f"must be finite and {bound}, got {_shown(value)}"
        return None

    return check


def _positive_int(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if type(value) is not int:
        return TypeError, f"expected an integer, got {type(value).__name__} {_shown(value)}"
    if value <= 0:
        return ValueError, f"must be > 0, got {value}"
    return None


def _count(value: Any) -> tuple[type[Exception], str] | None:
    if type(value) is not int:
        return TypeError, f"expected an integer, got {type(value).__name__} {_shown(value)}"
    if value < 0:
        return ValueError, f"must be >= 0, got {value}"
    return None


def _optional(kind: type[Any], what: str) -> Any:
    def check(value: Any) -> tuple[type[Exception], str] | None:
        if value is None or isinstance(value, kind):
            return None
        return TypeError, f"expected {what} or None, got {type(value).__name__} {_shown(value)}"

    return check


def _str_dict(value: Any) -> tuple[type[Exception], str] | None:
    if type(value) is not dict:
        return TypeError, f"expected a dict of str to str, got {type(value).__name__}"
    for k, v in value.items():
        if type(k) is not str or type(v) is not str:
            shown = "[redacted]" if type(k) is str and k.lower() in SECRET_HEADERS else _shown(v)
            return TypeError, f"expected str keys and values, got {k!r}: {shown}"
    return None


def _secret(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if type(value) is not str:
        return TypeError, f"expected a string or None, got {type(value).__name__}"  # unshown
    problem = key_problem(value)
    return None if problem is None else (ValueError, problem)


def _headers(value: Any) -> tuple[type[Exception], str] | None:
    problem = _str_dict(value)
    if problem is not None:
        return problem
    for k, v in value.items():
        text = header_problem(k, v, secret=k.lower() in SECRET_HEADERS)
        if text is not None:
            return ValueError, text
    return None


def _base_url(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if type(value) is not str:
        return TypeError, f"expected a string or None, got {type(value).__name__} {_shown(value)}"
    problem = base_url_problem(value)
    return None if problem is None else (ValueError, problem)


def _dict(value: Any) -> tuple[type[Exception], str] | None:
    if type(value) is not dict:
        return TypeError, f"expected a dict, got {type(value).__name__}"
    return None


def _budgets(value: Any) -> tuple[type[Exception], str] | None:
    if type(value) is not dict:
        return TypeError, f"expected a dict of effort to token count, got {type(value).__name__}"
    for k, v in value.items():
        if k not in _EFFORTS:
            return ValueError, f"unknown effort {k!r}; expected one of {', '.join(_EFFORTS)}"
        problem = _positive_int(v)
        if problem is not None or v is None:
            return TypeError, f"[{k!r}]: expected a positive integer, got {_shown(v)}"
    return None


def _one_of(*allowed: Any) -> Any:
    def check(value: Any) -> tuple[type[Exception], str] | None:
        if value in allowed and type(value) in (str, type(None)):
            return None
        names = ", ".join(repr(a) for a in allowed)
        return ValueError, f"expected one of {names}, got {_shown(value)}"

    return check


def _payload_hook(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if not callable(value):
        return TypeError, f"expected a callable or None, got {type(value).__name__}"
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: trust it
    try:
        signature.bind({}, None)
    except TypeError:
        return TypeError, (
            f"must take two arguments, on_payload(payload, model), but its signature is "
            f"{_shown(str(signature))}"
        )
    return None


def _tool_choice(value: Any) -> tuple[type[Exception], str] | None:
    if value is None or (type(value) is str and value in ("auto", "none", "required")):
        return None
    if type(value) is dict:
        name = value.get("tool")
        if list(value) == ["tool"] and type(name) is str and name:
            return None
    return ValueError, (
        "expected 'auto', 'none', 'required' or {'tool': name}, got " + _shown(value)
    )


def _optional_bool(value: Any) -> tuple[type[Exception], str] | None:
    if value is None or type(value) is bool:
        return None
    return TypeError, f"expected True, False or None, got {type(value).__name__} {_shown(value)}"


def _stop(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if type(value) is not list:
        return TypeError, f"expected a list of strings, got {type(value).__name__} {_shown(value)}"
    for i, item in enumerate(value):
        if type(item) is not str or not item:
            return ValueError, f"[{i}]: expected a non-empty string, got {_shown(item)}"
    return None


def _optional_int(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if type(value) is not int:
        return TypeError, f"expected an integer, got {type(value).__name__} {_shown(value)}"
    if not -(2**63) <= value < 2**63:
        # What every vendor's field holds (a signed 64-bit integer); a 5,000-digit seed
        # would otherwise fail later, in the payload, naming nothing.
        return ValueError, (
            f"must fit in a signed 64-bit integer, got a number of {value.bit_length()} bits"
        )
    return None


_SESSION_ID_MAX = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _plain_text(
    value: Any, what: str, limit: int, *, header: bool
) -> tuple[type[Exception], str] | None:
    """An identifier sent as a header value or a vendor's id field: a string of at most
    `limit` characters with no control character (a CR or LF would split a header, a NUL
    ends a C string) and, for a header, ASCII only."""
    if type(value) is not str:
        return TypeError, f"expected {what}, got {type(value).__name__} {_shown(value)}"
    found = _CONTROL.search(value)
    if found is not None:
        return ValueError, (
            f"contains the control character U+{ord(found.group()):04X} at position "
            f"{found.start()}; an id is sent as a header or an id field and cannot hold one"
        )
    if header and not value.isascii():
        return ValueError, "must be ASCII: it is sent as an HTTP header value (x-affinity)"
    if len(value) > limit:
        return ValueError, f"is {len(value)} characters long; at most {limit} are sent"
    return None


def _session_id(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    return _plain_text(value, "a string or None", _SESSION_ID_MAX, header=True)


def _metadata(value: Any) -> tuple[type[Exception], str] | None:
    problem = _dict(value)
    if problem is not None or "user_id" not in value:
        return problem
    problem = _plain_text(value["user_id"], "a string", 256, header=False)
    if problem is not None:
        return problem[0], f"['user_id'] {problem[1]}"
    return None


def _unit(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if not _is_number(value):
        return TypeError, f"expected a number, got {type(value).__name__} {_shown(value)}"
    if not (_isfinite(value) and 0 <= value <= 1):
        return ValueError, f"must be between 0 and 1, got {_shown(value)}"
    return None


def _finite(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if not _is_number(value):
        return TypeError, f"expected a number, got {type(value).__name__} {_shown(value)}"
    if not _isfinite(value):
        return ValueError, f"must be finite, got {_shown(value)}"
    return None


def _schema(value: Any) -> tuple[type[Exception], str] | None:
    if value is None:
        return None
    if isinstance(value, type) and issubclass(value, BaseModel):
        return None
    if type(value) is not dict:
        return TypeError, (
            f"expected a JSON Schema dict or a pydantic model class, got {type(value).__name__}"
        )
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return ValueError, f"not JSON: {exc}"
    return None


_CHECKS: dict[str, typing.Callable[[Any], tuple[type[Exception], str] | None]] = {
    "temperature": _number(minimum=0, allow_equal=True, optional=True),
    "max_tokens": _positive_int,
    "api_key": _secret,
    "headers": _headers,
    "client": _optional(httpx.AsyncClient, "an httpx.AsyncClient"),
    "cancel": _optional(anyio.Event, "an anyio.Event"),
    "connect_timeout": _number(minimum=0, allow_equal=False, optional=True),
    "pool_timeout": _number(minimum=0, allow_equal=False, optional=True),
    "first_byte_timeout": _number(minimum=0, allow_equal=False, optional=True),
    "idle_timeout": _number(minimum=0, allow_equal=False, optional=True),
    "total_timeout": _number(minimum=0, allow_equal=False, optional=True),
    "max_retries": _count,
    "max_event_bytes": _positive_int,
    "max_retry_delay": _number(minimum=0, allow_equal=True, optional=False),
    "retry_backoff": _number(minimum=0, allow_equal=True, optional=False),
    "reasoning": _one_of(None, *_EFFORTS),
    "thinking_budgets": _budgets,
    "cache_retention": _one_of("none", "short", "long"),
    "session_id": _session_id,
    "metadata": _metadata,
    "on_payload": _payload_hook,
    "extra": _dict,
    "base_url": _base_url,
    "tool_choice": _tool_choice,
    "parallel_tool_calls": _optional_bool,
    "stop": _stop,
    "top_p": _unit,
    "top_k": _positive_int,
    "seed": _optional_int,
    "presence_penalty": _finite,
    "frequency_penalty": _finite,
    "output_schema": _schema,
    "budget": _session_id,
    "max_cost_usd": _number(minimum=0, allow_equal=True, optional=True),
}


def copy_controls(
    options: StreamOptions, fields: typing.Mapping[str, str], into: dict[str, Any]
) -> None:
    """Copy each control set on `options` into `into` under its vendor name (`fields`, a
    table at the top of the provider module: control -> vendor field). Lists are copied, so
    the payload never aliases the caller's options."""
    for control, name in fields.items():
        value = getattr(options, control)
        if value is not None:
            into[name] = list(value) if isinstance(value, list) else value


def refuse_forced_tool(options: StreamOptions, api: str, why: str) -> None:
    """Raise at `stream()` when `options.tool_choice` forces a tool (`"required"` or a named
    one) and the request cannot take that (`why`, e.g. "while extended thinking is on")."""
    choice = options.tool_choice
    if choice == "required" or isinstance(choice, dict):
        raise ValueError(
            f"StreamOptions.tool_choice: {api} cannot force a tool ({choice!r}) {why}; use "
            "'auto' (an output_schema on a model without native structured output forces a "
            "tool too)"
        )
