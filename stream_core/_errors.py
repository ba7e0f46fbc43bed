"""Failures as data: the tables that turn HTTP statuses, vendor error types and transport
exceptions into a `StreamError` kind, in one place.

Failure classes raised inside the pipeline (never out of a stream):

    StreamFailure            carries a finished `StreamError`
      ProtocolError          the vendor sent something we cannot read (kind "protocol")
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping

from ._checks import SECRET_HEADERS
from ._types import ErrorKind, StreamError

__all__ = [
    "OVERFLOW_PATTERNS",
    "ProtocolError",
    "StreamFailure",
    "error_from_status",
    "error_from_vendor",
    "is_context_overflow",
    "redact",
    "status_from_code",
    "secrets_in",
]

RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server", "network", "timeout"}
)

STATUS_KINDS: dict[int, ErrorKind] = {
    400: "invalid_request",
    401: "auth",
    403: "auth",
    404: "not_found",
    408: "timeout",
    409: "server",
    413: "context_overflow",
    422: "invalid_request",
    429: "rate_limit",
    500: "server",
    502: "server",
    503: "overloaded",
    504: "timeout",
    529: "overloaded",
}
RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 409, 429, 500, 502, 503, 504, 529})

# Vendor error `type`/`code` values, as Anthropic and OpenAI-compatible servers send them
# in an error body or a mid-stream error event.
_KIND_NAMES = frozenset(typing.get_args(ErrorKind))

VENDOR_ERROR_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "rate_limit_exceeded": "rate_limit",
    "insufficient_quota": "rate_limit",
    "api_error": "server",
    "server_error": "server",
    "internal_server_error": "server",
    "service_unavailable": "overloaded",
    "timeout_error": "timeout",
    "invalid_request_error": "invalid_request",
    "invalid_request": "invalid_request",
    "tool_use_failed": "invalid_request",
    "authentication_error": "auth",
    "invalid_api_key": "auth",
    "permission_error": "auth",
    "not_found_error": "not_found",
    "model_not_found": "not_found",
    "request_too_large": "context_overflow",
    "context_length_exceeded": "context_overflow",
    "content_filter": "content_filter",
}

# Vendor wording for "the prompt does not fit the context window" (pi-ai reference 4.3).
OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",
        r"input is too long for requested model",
        r"exceeds the context window",
        r"input token count.*exceeds the maximum",
        r"maximum prompt length is \d+",
        r"reduce the length of the messages",
        r"maximum context length is \d+ tokens",
        r"exceeds the limit of \d+",
        r"exceeds the available context size",
        r"greater than the context length",
        r"context window exceeds limit",
        r"exceeded model token limit",
        r"too large for model with \d+ maximum context length",
        r"model_context_window_exceeded",
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
        r"^4(00|13)\s*(status code)?\s*\(no body\)",
        # Proxies wrap the upstream text in their own words: LiteLLM raises
        # `ContextWindowExceededError`, others say "context window/length exceeded".
        r"context ?window ?exceeded",
        r"context[_ ](length|window|size)[_ ]?(is )?(exceeded|overflow)",
        r"exceeds? (the )?(model'?s? )?(maximum )?context (length|window|size)",
        r"maximum context length",
        r"tokens \+ `?max_new_tokens`? must be <=",  # Hugging Face TGI
    )
)
"""Vendor and proxy wordings of "the prompt does not fit the context window", matched
case-insensitively: `error_from_status` and `error_from_vendor` turn an `invalid_request` or
`server` error whose message matches one into `context_overflow`."""


def status_from_code(code: object) -> int | None:
    """An HTTP status from a vendor's error `code`: an integer or a string of digits (LiteLLM
    and other proxies send `"code": "500"`); None for anything else (`"rate_limit"`)."""
    if type(code) is str and len(code) == 3 and code.isascii() and code.isdigit():
        code = int(code)
    if type(code) is int and 100 <= code <= 599:
        return code
    return None


def is_context_overflow(message: str) -> bool:
    """True when an error message says the prompt did not fit the model's context window.

    Vendors word this many ways (`OVERFLOW_PATTERNS`). stream-core already gives such errors
    the kind `context_overflow`; this checks text from elsewhere (a gateway's log, another
    library's exception).
    """
    return any(p.search(message) for p in OVERFLOW_PATTERNS)


class StreamFailure(Exception):
    """Ends a stream with `error` (raised inside the pipeline, caught by the stream)."""

    def __init__(self, error: StreamError) -> None:
        super().__init__(error.message)
        self.error = error


class ProtocolError(StreamFailure):
    """The vendor's stream broke its own format: ends the stream with kind `protocol`.

    Raise it from a translator or decoder with a message saying what was wrong.
    """

    def __init__(self, message: str) -> None:
        super().__init__(StreamError(kind="protocol", message=message))


def _kind_with_overflow(kind: ErrorKind, message: str) -> ErrorKind:
    if kind in ("invalid_request", "context_overflow", "server") and is_context_overflow(message):
        return "context_overflow"
    return kind


def error_from_status(
    status: int, message: str, *, vendor_type: str | None = None, retry_after: float | None = None
) -> StreamError:
    """The error for an HTTP status, refined by the vendor's error type and wording."""
    kind: ErrorKind = STATUS_KINDS.get(status, "server" if status >= 500 else "invalid_request")
    if vendor_type and vendor_type in VENDOR_ERROR_KINDS and status < 500:
        kind = VENDOR_ERROR_KINDS[vendor_type]
    kind = _kind_with_overflow(kind, message)
    retryable = status in RETRYABLE_STATUSES or status >= 500
    return StreamError(
        kind=kind,
        message=message,
        status_code=status,
        retryable=retryable and kind != "context_overflow",
        retry_after=retry_after,
    )


def error_from_vendor(
    vendor_type: str | None,
    message: str,
    *,
    status: int | str | None = None,
    extra_kinds: Mapping[str, ErrorKind] | None = None,
) -> StreamError:
    """The error for a mid-stream vendor error event: same kinds as the matching status.

    `status` may be the vendor's `code` as sent (`500` or `"500"`); a numeric `vendor_type`
    (a proxy's `"code": "429"` with no type) is read as the status too.
    """
    status = status_from_code(status)
    if status is None and vendor_type is not None:
        status = status_from_code(vendor_type)
        if status is not None:
            vendor_type = None
    kind: ErrorKind | None = None
    if vendor_type:
        kind = (extra_kinds or {}).get(vendor_type) or VENDOR_ERROR_KINDS.get(vendor_type)
        if kind is None and vendor_type in _KIND_NAMES:
            kind = typing.cast(ErrorKind, vendor_type)  # a kind by its own name: "overloaded"
    if kind is None and status is not None:
        return error_from_status(status, message, vendor_type=vendor_type)
    kind = _kind_with_overflow(kind or "server", message)
    return StreamError(
        kind=kind, message=message, status_code=status, retryable=kind in RETRYABLE_KINDS
    )


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced, whatever its length.

    A secret of 8 characters or more is replaced wherever it appears, and so is any run
    that starts with its first 8 characters (vendors echo a key's head: "sk-ab***"). A
    shorter one (a local gateway's `sk-1234`, `EMPTY`) is replaced only as a whole token,
    not preceded or followed by a letter, digit, `_` or `-`: a one-letter key must not
    blank that letter in every word.
    """
    for secret in secrets:
        if not secret:
            continue
        if len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
            text = re.sub(re.escape(secret[:8]) + r"[^\s\"',]*", "[redacted]", text)
        elif secret in text:
            text = re.sub(
                r"(?<![A-Za-z0-9_-])" + re.escape(secret) + r"(?![A-Za-z0-9_-])",
                "[redacted]",
                text,
            )
    return text


_AUTH_SCHEMES = re.compile(r"^(?:bearer|basic|token|apikey|api-key)\s+", re.IGNORECASE)


def secrets_in(headers: Mapping[str, str], api_key: str | None = None) -> tuple[str, ...]:
    """Every credential a request carries: the API key, and the value of each auth header
    (`SECRET_HEADERS`), whole and without its scheme (`Bearer `), and each cookie value."""
    found: list[str] = [api_key] if api_key else []
    for name, value in headers.items():
        if name.lower() not in SECRET_HEADERS or not value:
            continue
        found.append(value)
        bare = _AUTH_SCHEMES.sub("", value).strip()
        if bare != value:
            found.append(bare)
        if name.lower() == "cookie":
            found += [part.partition("=")[2].strip() for part in value.split(";")]
    # Longest first, so a whole value is replaced before a part of it.
    return tuple(sorted({s for s in found if s}, key=len, reverse=True))


# --- what is kept across calls, and what a log line quotes -----------------------------------

_QUOTE_LIMIT = 64
KEPT_LIMIT = 256
"""The most entries any process-wide cache or "warned once" set holds."""


def quote(value: str, limit: int = _QUOTE_LIMIT) -> str:
    """`repr` of a vendor value for a log line, cut to a short prefix (a vendor may send
    megabytes where a word was expected)."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} chars)"


def first_time(seen: set[tuple[str, ...]], *key: str) -> bool:
    """Whether `key` is new to `seen`, recording it: for "warn once" per value. Keys are
    cut to a short prefix and the set holds at most `KEPT_LIMIT` of them (then it starts
    over: a warning may repeat, memory never grows with what vendors send)."""
    kept = tuple(k[:_QUOTE_LIMIT] for k in key)
    if kept in seen:
        return False
    if len(seen) >= KEPT_LIMIT:
        seen.clear()
    seen.add(kept)
    return True
