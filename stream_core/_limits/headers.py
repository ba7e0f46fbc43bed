"""The rate-limit state a vendor reports in response headers, read into `RateLimit`s.

Anthropic sends `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
remaining,reset}` (resets as RFC 3339 times); OpenAI, Azure and the servers that copy them
send `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (resets as Go durations such
as `6m0s` or `20ms`, some as plain seconds). Header values are untrusted: a value that is
not a plain count or a readable time is left out, never raised. A reset sent as a time
(RFC 3339, or a Unix time) is read against the response's `Date` when this host's clock
is off from it by more than `_SKEW` seconds: a worker whose clock is an hour slow does not
take a reset 10 s away for one an hour away (and pause everyone sharing the store).
"""

from __future__ import annotations

import re
from datetime import datetime
from email.utils import parsedate_to_datetime

import httpx

from .._types import RateLimit

__all__ = ["limits_from_headers"]

_ANTHROPIC = "anthropic-ratelimit-"
_OPENAI = "x-ratelimit-"
_MAX_VALUE = 10**15  # a count beyond this is not a rate limit
_MAX_WAIT = 366 * 86_400.0  # a reset further than a year away is not one either
_COUNT = re.compile(r"[0-9]{1,16}")
_SECONDS = re.compile(r"[0-9]{1,10}(\.[0-9]{1,9})?")
_DURATION = re.compile(
    r"(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m(?!s))?(?:([0-9.]{1,12})s)?(?:([0-9.]{1,12})ms)?"
)
_SKEW = 2.0  # seconds: `Date` has whole seconds; a clock this close is taken as right
_MAX_SKEW = 86_400.0
"""A `Date` further off than a day is not this response's time (a recording replayed, a
cached answer), not a host's clock: resets are then read as sent."""
_OPENAI_NAMES = frozenset({"requests", "tokens"})
_PARTS = frozenset({"limit", "remaining", "reset"})
_ANTHROPIC_NAMES = {
    "requests": "requests",
    "tokens": "tokens",
    "input-tokens": "input_tokens",
    "output-tokens": "output_tokens",
}


def limits_from_headers(headers: httpx.Headers, now: float) -> list[RateLimit] | None:
    """The limits `headers` report (`now`: the time they arrived, `time.time()`), or None
    when they report none."""
    found: dict[str, dict[str, float | int]] = {}
    clock: list[float] = []  # [the vendor's time less ours], once an absolute reset needs it
    for name, value in headers.multi_items():
        if name.startswith(_ANTHROPIC):
            limit, _, part = name[len(_ANTHROPIC) :].rpartition("-")
            key = _ANTHROPIC_NAMES.get(limit)
            if key is not None and part in _PARTS:
                _store(found, key, part, value, now, headers, clock, rfc3339=True)
        elif name.startswith(_OPENAI):
            part, _, limit = name[len(_OPENAI) :].partition("-")
            if limit in _OPENAI_NAMES and part in _PARTS:
                _store(found, limit, part, value, now, headers, clock, rfc3339=False)
    if not found:
        return None
    return [
        RateLimit(
            name=key,
            limit=int(parts["limit"]) if "limit" in parts else None,
            remaining=int(parts["remaining"]) if "remaining" in parts else None,
            resets_at=float(parts["reset"]) if "reset" in parts else None,
        )
        for key, parts in found.items()
    ]


def _store(
    found: dict[str, dict[str, float | int]],
    key: str,
    part: str,
    value: str,
    now: float,
    headers: httpx.Headers,
    clock: list[float],
    *,
    rfc3339: bool,
) -> None:
    value = value.strip()
    parsed: float | int | None
    if part != "reset":
        parsed = int(value) if _COUNT.fullmatch(value) else None
        if parsed is not None and parsed > _MAX_VALUE:
            parsed = None
    else:
        parsed = _reset_at(value, now, headers, clock, rfc3339=rfc3339)
    if parsed is not None:
        found.setdefault(key, {})[part] = parsed


def _offset(headers: httpx.Headers, now: float, clock: list[float]) -> float:
    """Seconds this host's clock is ahead of the vendor's, by the response's `Date` (0
    when within `_SKEW`, absent, unreadable or more than `_MAX_SKEW` off)."""
    if not clock:
        clock.append(0.0)
        date = headers.get("date")
        if date and len(date) <= 64:
            try:
                ahead = now - parsedate_to_datetime(date).timestamp()
            except (TypeError, ValueError, OverflowError, IndexError):
                ahead = 0.0
            if _SKEW < abs(ahead) <= _MAX_SKEW:
                clock[0] = ahead
    return clock[0]


def _reset_at(
    value: str, now: float, headers: httpx.Headers, clock: list[float], *, rfc3339: bool
) -> float | None:
    """The Unix time, by this host's clock, of the reset `value` names (a time as sent,
    by the vendor's: see `_offset`; or `now` plus a wait), or None if it names none within
    a year."""
    at: float | None = None
    if _SECONDS.fullmatch(value):
        number = float(value)
        # Plain seconds, or (a few servers) the reset as a Unix time.
        at = number + _offset(headers, now, clock) if number > 1e9 else now + number
    elif rfc3339 or "T" in value:
        if len(value) <= 40:
            try:
                at = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except (ValueError, OverflowError):
                return None
            at += _offset(headers, now, clock)
    elif value and len(value) <= 40:
        m = _DURATION.fullmatch(value)
        if m is not None and any(m.groups()):
            try:
                h, mi, sec, ms = (float(g) if g else 0.0 for g in m.groups())
            except ValueError:  # "1.2.3s"
                return None
            at = now + h * 3600 + mi * 60 + sec + ms / 1000
    if at is None or abs(at - now) > _MAX_WAIT:
        return None
    return round(at, 3)
