"""Per-call options, shared by every provider."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx

if typing.TYPE_CHECKING:
    from ._models import Model

__all__ = ["PayloadHook", "ReasoningEffort", "StreamOptions", "THINKING_BUDGETS"]

ReasoningEffort = Literal["minimal", "low", "medium", "high"]
PayloadHook = typing.Callable[[dict[str, Any], "Model"], "dict[str, Any] | None"]

THINKING_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
"""Default thinking-token budget per effort, for vendors that take a budget."""

_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})


@dataclass(kw_only=True)
class StreamOptions:
    """Everything a call may tune. Every field is optional.

    Timeouts are in seconds and separate: `connect_timeout` (TCP/TLS), `first_byte_timeout`
    (request sent to response headers), `idle_timeout` (silence between two chunks of the
    body). None disables one.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    """Output limit; defaults to the model's `max_tokens` (Anthropic requires one)."""
    api_key: str | None = field(default=None, repr=False)
    """Else the provider's environment variable."""
    headers: dict[str, str] = field(default_factory=dict)
    client: httpx.AsyncClient | None = None
    """Use this client (connection pool, proxies, a mock transport) instead of the keep-alive
    client shared by calls on the same event loop. It is never closed by the stream."""
    cancel: anyio.Event | None = None
    """Set it to abort: the response is closed and the message ends `aborted`."""
    connect_timeout: float | None = 10.0
    first_byte_timeout: float | None = 300.0
    idle_timeout: float | None = 120.0
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
    """Called with the outgoing payload; return a dict to send that instead."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific knobs (e.g. `tool_choice`), documented by each provider."""

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
                    k: ("[redacted]" if k.lower() in _SECRET_HEADERS else v)
                    for k, v in value.items()
                }
            shown.append(f"{f.name}={value!r}")
        if self.api_key is not None:
            shown.append("api_key=[redacted]")
        return f"StreamOptions({', '.join(shown)})"

    def thinking_budget(self) -> int | None:
        if self.reasoning is None:
            return None
        return self.thinking_budgets.get(self.reasoning, THINKING_BUDGETS[self.reasoning])
