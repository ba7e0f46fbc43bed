"""Windowed quotas for the fake vendor, answered with each vendor's real rate-limit headers,
so a harness tests its own limits offline: `fake_vendor(..., quota=Quota(requests=60,
tokens=100_000, window=60.0))`, or `stream-core serve --quota-requests 60 ...`.

Each model is counted on its own (as the vendors count), in fixed windows of `window`
seconds aligned to the clock (a window of 60 s resets on the minute). A request that names
a model counts one request and its tokens as it arrives: the characters of its text / 4
as input (the vendors' own rough rule) plus the output it asks for at most (`max_tokens`
and its kin; as OpenAI counts against its limit), never settled to what was used. A
request over either limit is not answered: the vendor's 429, in its error shape, with
`retry-after` (whole seconds until the window resets; Gemini's `RetryInfo` in the body
too), and nothing counted.

Every answer to a model (the 429 included) carries the vendor's headers, as the library's
`_limits.headers` reads them:

- Anthropic Messages: `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`, the
  reset an RFC 3339 time in whole seconds (rounded up);
- OpenAI's shape (Chat Completions, Responses, Mistral and other OpenAI-compatible
  paths): `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, the reset a Go
  duration such as `6m0s` or `250ms`;
- Gemini, Bedrock and Ollama send no rate-limit headers: only their 429.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._limits.headers import _ANTHROPIC, _OPENAI
from ._scenarios import ANY_MODEL, OURS, error_body, shape_of

__all__ = ["Quota", "QuotaBook", "QuotaCharge", "QuotaSpec"]

_MAX_COUNT = 10**15


@dataclass(frozen=True)
class Quota:
    """A vendor's limit for one model: at most `requests` requests and `tokens` tokens
    (input estimate plus the output asked for) in each window of `window` seconds. None:
    that one is not limited."""

    requests: int | None = None
    tokens: int | None = None
    window: float = 60.0

    def __post_init__(self) -> None:
        for name in ("requests", "tokens"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 1 <= value <= _MAX_COUNT):
                raise ValueError(f"Quota.{name}: expected a count of at least 1, got {value!r}")
        window = self.window
        if type(window) not in (int, float) or not math.isfinite(window) or window <= 0:
            raise ValueError(f"Quota.window: expected seconds > 0, got {window!r}")
        if self.requests is None and self.tokens is None:
            raise ValueError("Quota: give requests, tokens or both")


QuotaSpec = Quota | Mapping[str, Quota] | None
"""One quota every model gets (each counted on its own), or model id -> quota (`"*"`:
any model not named), or None."""


@dataclass
class QuotaCharge:
    """What one request met: the headers to answer with, and when it is over quota, the
    429 to answer instead (status, label, body, metadata, error shape: what
    `FakeVendor.pick` returns)."""

    headers: list[tuple[str, str]]
    refusal: tuple[int, str, bytes, dict[str, Any], str] | None = None


_NONE = QuotaCharge([])


class QuotaBook:
    """The fake vendor's count of each model's window (thread-safe: one handler thread
    per connection). `clock` (Unix seconds) may be replaced by a test."""

    def __init__(self, spec: QuotaSpec, clock: Callable[[], float] = time.time) -> None:
        if spec is not None and not isinstance(spec, Quota):
            if not isinstance(spec, Mapping):
                raise TypeError(f"quota: expected a Quota or a mapping of them, got {spec!r}")
            for model, quota in spec.items():
                if not isinstance(model, str) or not isinstance(quota, Quota):
                    raise TypeError(f"quota[{model!r}]: expected a Quota, got {quota!r}")
        self.spec = spec
        self.clock = clock
        self.windows: dict[str, list[float]] = {}
        """Per model: [window index, requests, tokens] of its current window."""
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return self.spec is not None

    def quota_of(self, model: str) -> Quota | None:
        spec = self.spec
        if spec is None or isinstance(spec, Quota):
            return spec
        return spec.get(model, spec.get(ANY_MODEL))

    def charge(self, method: str, path: str, model: str, raw: bytes) -> QuotaCharge:
        """Count a request to `model` (a POST that names one) against its quota."""
        quota = self.quota_of(model) if model and method == "POST" else None
        if quota is None:
            return _NONE
        cost = _tokens(raw) if quota.tokens is not None else 0
        now = self.clock()
        index = math.floor(now / quota.window)
        with self._lock:
            w = self.windows.get(model)
            if w is None or w[0] != index:
                w = self.windows[model] = [index, 0, 0]
            over = (quota.requests is not None and w[1] + 1 > quota.requests) or (
                quota.tokens is not None and w[2] + cost > quota.tokens
            )
            if not over:
                w[1] += 1
                w[2] += cost
            used_requests, used_tokens = int(w[1]), int(w[2])
        reset = (index + 1) * quota.window
        shape = shape_of(path)
        headers = _headers(shape, quota, used_requests, used_tokens, reset, now)
        if not over:
            return QuotaCharge(headers)
        wait = max(1, math.ceil(reset - now))
        headers.append(("retry-after", str(wait)))
        what = (
            "requests"
            if quota.requests is not None and used_requests >= quota.requests
            else "tokens"
        )
        text = (
            f"rate limit reached for {model}: {what} per {quota.window:g} s "
            f"(fake vendor quota); retry after {wait} s"
        )
        status, body = error_body(shape, "rate_limit", text)
        if shape == "google":
            body["error"]["details"] = [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait}s"}
            ]
        data = json.dumps(body).encode()
        return QuotaCharge(headers, (429, "over quota", data, {OURS: True}, shape))


def _tokens(raw: bytes) -> int:
    """A request's charge: the characters of its text (every string in the body but the
    model's name) / 4 as input, plus the most output it asks for. A body that is not
    JSON is charged its bytes / 4."""
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, RecursionError):  # not JSON, or nested past what json reads
        return math.ceil(len(raw) / 4)
    if not isinstance(body, dict):
        return math.ceil(len(raw) / 4)
    # The request fields that bound the output: Anthropic's, Chat's, Responses', Gemini's
    # and Bedrock's.
    gemini, bedrock = body.get("generationConfig"), body.get("inferenceConfig")
    asked = max(
        _count(body.get("max_tokens")),
        _count(body.get("max_completion_tokens")),
        _count(body.get("max_output_tokens")),
        _count(gemini.get("maxOutputTokens")) if isinstance(gemini, dict) else 0,
        _count(bedrock.get("maxTokens")) if isinstance(bedrock, dict) else 0,
    )
    chars = _chars({k: v for k, v in body.items() if k != "model"})
    return math.ceil(chars / 4) + asked


def _chars(value: Any) -> int:
    """The characters of every string in a parsed JSON value (iteratively: a body nested
    thousands deep is not a recursion error)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total


def _count(value: Any) -> int:
    if type(value) is int and 0 <= value <= _MAX_COUNT:
        return value
    return 0


def _headers(
    shape: str, quota: Quota, requests: int, tokens: int, reset: float, now: float
) -> list[tuple[str, str]]:
    limits = [
        (name, limit, used)
        for name, limit, used in (
            ("requests", quota.requests, requests),
            ("tokens", quota.tokens, tokens),
        )
        if limit is not None
    ]
    out: list[tuple[str, str]] = []
    if shape == "anthropic":
        at = datetime.fromtimestamp(math.ceil(reset), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name, limit, used in limits:
            out += [
                (f"{_ANTHROPIC}{name}-limit", str(limit)),
                (f"{_ANTHROPIC}{name}-remaining", str(max(limit - used, 0))),
                (f"{_ANTHROPIC}{name}-reset", at),
            ]
    elif shape == "openai":
        left = _duration(max(reset - now, 0.0))
        for name, limit, used in limits:
            out += [
                (f"{_OPENAI}limit-{name}", str(limit)),
                (f"{_OPENAI}remaining-{name}", str(max(limit - used, 0))),
                (f"{_OPENAI}reset-{name}", left),
            ]
    return out


def _duration(seconds: float) -> str:
    """OpenAI's reset: a Go duration (`6m0s`, `1.5s`, `250ms`, `1h2m3s`)."""
    ms = math.ceil(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    text = f"{hours}h" if hours else ""
    text += f"{minutes}m" if hours or minutes else ""
    return f"{text}{secs}s"
