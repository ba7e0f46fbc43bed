"""Error text made from what a vendor sent: error bodies, proxy pages, response headers.

An error body or event becomes (vendor type, message) (`vendor_error_text`,
`vendor_error_fields`; the providers use the latter for their error events); a proxy's HTML
page becomes its visible words (`strip_markup`), cut short for a message; the headers give the
request id and the Retry-After delay a `StreamError` carries. Kept apart from `_pipeline.stream` so
the stream and the providers word vendor errors one way.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from typing import Any

import httpx
from pydantic_core import from_json

# How much of an error body is read: a vendor's JSON error fits, a proxy's page is cut.
_ERROR_BODY_LIMIT = 64 * 1024


_REQUEST_ID_HEADERS = (
    "request-id",  # Anthropic
    "x-request-id",  # OpenAI and most compatible servers
    "x-amzn-requestid",  # AWS
    "apim-request-id",  # Azure
    "x-ms-request-id",
)


def request_id(headers: httpx.Headers) -> str | None:
    """The vendor's request id from response headers, if it sent one."""
    for name in _REQUEST_ID_HEADERS:
        value: str | None = headers.get(name)
        if value:
            return value[:200]
    return None


# A tag opens with a name, `/` or `!` and cannot hold another `<`: a run of stray `<`
# stays linear, and "a < b" in plain text is not a tag.
_TAGS = re.compile(r"<[a-zA-Z/!?][^<>]*>")
# Where a browser shows nothing until the matching close: scripts, styles, the head.
_HIDDEN_OPEN = re.compile(r"<(script|style|head|noscript|!--)", re.IGNORECASE)
_ERROR_TEXT_LIMIT = 500


def _snippet(body: bytes, limit: int = 200) -> str:
    """The first words of a body, markup stripped, for an error message."""
    text = strip_markup(body[: limit * 16].decode("utf-8", "replace"))
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def strip_markup(text: str) -> str:
    """The visible words of an HTML page (a proxy's error or login page), on one line.
    Linear in the text, whatever the markup (vendor bytes are untrusted)."""
    if "<" in text:
        import html  # an HTML error page is rare: not at import

        text = html.unescape(_TAGS.sub(" ", _drop_hidden(text)))
    return " ".join(text.split())


def _drop_hidden(text: str) -> str:
    lower = text.lower()
    kept: list[str] = []
    pos = 0
    while (found := _HIDDEN_OPEN.search(text, pos)) is not None:
        kept.append(text[pos : found.start()])
        name = found.group(1).lower()
        closer = "-->" if name == "!--" else f"</{name}"
        end = lower.find(closer, found.end())
        if end < 0:
            return " ".join(kept)  # never closed: the rest is hidden too
        pos = end + len(closer)
        if name != "!--":
            pos = text.find(">", pos) + 1 or len(text)
    kept.append(text[pos:])
    return " ".join(kept)


def _unreadable(event: str, exc: Exception) -> str:
    return f"unreadable {event or 'data'} event: {type(exc).__name__}: {exc}"


def vendor_error_text(body: bytes) -> tuple[str | None, str]:
    """(vendor error type, message) from an error body, Anthropic or OpenAI shaped."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = from_json(body) if body else None
    except ValueError:
        data = None
    if data is not None:
        return vendor_error_fields(data)
    # Not JSON: a proxy's page. Its words, not its markup, and not all of them.
    text = strip_markup(text)
    if len(text) > _ERROR_TEXT_LIMIT:
        text = text[: _ERROR_TEXT_LIMIT - 3] + "..."
    return None, text


def vendor_error_fields(data: Any) -> tuple[str | None, str]:
    """(type, message) from `{"error": {...}}`, `{"type": "error", "error": {...}}`, a flat
    `{"error": "...", "error_type": "..."}` or a bare error object; an OpenRouter upstream
    detail (`metadata.raw`) is appended.

    Vendor JSON of any shape gives strings (never raises): a field of the wrong type is
    shown as its JSON text, or skipped where a name is due. The message is never blank: an
    error that says nothing is named by its type."""
    kind, message = _fields(data)
    if not message.strip():
        message = f"the vendor's error said nothing (type {kind})" if kind else _NOTHING_SAID
    return kind, message


_NOTHING_SAID = "the vendor's error said nothing"


def _fields(data: Any) -> tuple[str | None, str]:
    err = data.get("error", data) if type(data) is dict else data
    if type(err) is str:
        # A flat body: {"error": "...", "error_type": "..."} (TGI and others) or "type".
        flat = (
            (_name(data.get("error_type")) or _name(data.get("type")))
            if type(data) is dict
            else None
        )
        return (flat if flat != "error" else None), err
    if type(err) is not dict:
        return None, _as_text(err)
    kind = _name(err.get("type")) or _name(err.get("code"))
    code = _name(err.get("code"))
    message = next(
        (
            _as_text(v)
            for v in (err.get("message"), err.get("detail"))
            if v is not None and _as_text(v).strip()
        ),
        kind or "unknown error",
    )
    metadata = err.get("metadata")
    raw = metadata.get("raw") if type(metadata) is dict else None
    if raw not in (None, ""):
        message += f"\n{_as_text(raw)}"
    # A specific code (context_length_exceeded) says more than a generic type.
    if (
        code
        and code != kind
        and kind == "invalid_request_error"
        and not code.isdigit()  # a proxy's "400" is a status (see `error_from_vendor`)
    ):
        kind = code
    return kind, message


def _name(value: Any) -> str | None:
    """A vendor error type or code: a non-empty string, or an integer code as text."""
    if type(value) is str:
        return value or None
    if type(value) is int:
        return str(value)
    return None


def _as_text(value: Any) -> str:
    if type(value) is str:
        return value
    try:
        return json.dumps(value, ensure_ascii=False)[:2000]
    except (TypeError, ValueError):  # pragma: no cover - vendor JSON always dumps
        return type(value).__name__


_RETRY_AFTER_CAP = 1e9
"""Seconds: a longer wait (`1e309`, a date in the year 9999) is kept as this, so the
number stays finite and the JSONL dump strict JSON."""


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """The wait the vendor asked for (`retry-after-ms`, `retry-after` in seconds or as an
    HTTP date), in seconds; None when absent or unreadable (`30s`, `soon`, `0x10`, an
    impossible date, NaN): the call then backs off as if the header were absent, and the
    status keeps its kind."""
    ms = headers.get("retry-after-ms")
    if ms:
        seconds = _seconds(ms, 1000)
        if seconds is not None:
            return seconds
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _seconds(value, 1)
    if seconds is not None:
        return seconds
    try:
        parsed = email.utils.parsedate_to_datetime(value)
        at = parsed.timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return _finite(at - time.time())


def _seconds(text: str, per_second: int) -> float | None:
    try:
        value = float(text) / per_second
    except (ValueError, OverflowError):
        return None
    return _finite(value)


def _finite(value: float) -> float | None:
    if math.isnan(value):
        return None
    return min(max(0.0, value), _RETRY_AFTER_CAP)


_DURATION_JSON = re.compile(r"([0-9]{1,10}(?:\.[0-9]{1,9})?)s")


_RETRY_IN_WORDS = re.compile(rb"[Pp]lease retry in ([0-9]{1,6}(?:\.[0-9]{1,9})?)s\b")


def retry_delay_in_body(body: bytes) -> float | None:
    """The wait a Google-style error body asks for (`error.details[]` holding a
    `google.rpc.RetryInfo` with `retryDelay: "30s"`), in seconds; None when it asks for
    none or the body is not that shape."""
    if b"RetryInfo" not in body:
        # Some answers say it only in words: "Please retry in 52.4s."
        said = _RETRY_IN_WORDS.search(body[:_ERROR_BODY_LIMIT])
        return _finite(float(said.group(1))) if said is not None else None
    try:
        data = from_json(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return None
    for detail in details[:20]:
        if (
            isinstance(detail, dict)
            and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo")
            and isinstance(detail.get("retryDelay"), str)
        ):
            m = _DURATION_JSON.fullmatch(detail["retryDelay"].strip())
            if m is not None:
                return _finite(float(m.group(1)))
    return None
