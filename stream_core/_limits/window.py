"""The limiter's arithmetic on one key's state: admit, settle, learn from a report, pause.

One state per key (provider, base URL, key hash, model), a JSON-able dict, so the same
functions serve the in-process store and the file store, and `redis.lua` is a line-by-line
port of them (the store tests run one scenario table through all three):

    {"p": paused until (Unix time), "c": cooling until (routes),
     "n": {limit name: [limit, available, resets_at, generation, period]}}

`available` counts down as calls are admitted (each reserves its need) and is set whole
again when `resets_at` passes (a new generation); a vendor's report can only lower it (to
its `remaining`): our own count already holds every call sent since the report was made,
so a lower figure means usage this store did not see.
A settlement gives back what a call reserved and did not use, in the generation it was
reserved in only. `period` is the longest reset wait seen: the next window's reset when a
window rolls before the vendor has said (`PERIOD` while none has been seen). Nothing here
sleeps or does I/O.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "LATE",
    "PERIOD",
    "POLL",
    "SLACK",
    "admit",
    "budget_admit",
    "budget_settle",
    "pause",
    "settle",
]

POLL = 0.05
"""Seconds between looks at a token limit that is used up (the calls in flight give back
what they did not use as they end), or at any limit with no reset time known."""

LATE = 0.1
"""Seconds past a reported reset before a window counts as whole again: a call admitted
just before the reset may reach the vendor just after it and count in the new window."""

PERIOD = 60.0
"""Seconds a window is taken to last when the vendor reports a limit with no reset (or
only resets already past): rate limits are per minute. Without it a limit whose reset is
never said would only count down, and every call would wait on it for ever."""

SLACK = 1.0
"""Vendors round their reset times (whole seconds, `6m0s`): resets this close are the
same window's."""

Entry = dict[str, Any]
Snapshot = dict[str, int]
"""Per limit name: the generation (window) the call's reservation was made in."""


def _roll(s: list[Any], now: float) -> None:
    """A window whose reset has passed starts whole; the next reset is a period on."""
    r, period = s[2], s[4] if s[4] > 0 else PERIOD
    s[1] = s[0]
    s[3] += 1
    s[2] = r + period * (math.floor((now - r) / period) + 1)


def admit(
    entry: Entry, needs: dict[str, int], now: float, route: bool = False
) -> tuple[float, Snapshot]:
    """(0, the snapshot) after reserving `needs` against every known limit, or (seconds to
    wait, {}) when one of them is short (nothing reserved). A need larger than the whole
    limit is admitted when its window is whole: one such call a window, never none. A
    route's attempt (`route`) waits for the key's cooldown too."""
    paused = entry.get("p", 0.0)
    if route:
        paused = max(paused, entry.get("c", 0.0))
    if paused > now:
        return paused - now, {}
    names: dict[str, list[Any]] | None = entry.get("n")
    if not names:
        return 0.0, {}
    wait = 0.0
    for name, s in names.items():
        if s[2] and now >= s[2] + LATE:
            _roll(s, now)
        need = needs.get(name, 0)
        if need > s[1] and not (need > s[0] and s[1] >= s[0]):
            # Requests come back only at the reset; tokens also as calls in flight settle.
            w = s[2] + LATE - now if s[2] else POLL
            wait = max(wait, w if name == "requests" else min(w, POLL))
    if wait > 0:
        return wait, {}
    snap: Snapshot = {}
    for name, s in names.items():
        need = needs.get(name, 0)
        s[1] -= need
        snap[name] = s[3]
    return 0.0, snap


def settle(
    entry: Entry,
    snap: Snapshot,
    used: dict[str, int],
    needs: dict[str, int],
    report: list[list[Any]],
    pause_until: float,
    now: float,
) -> None:
    """The end of an attempt: what it reserved (`needs`, in `snap`'s generations) less what
    it used goes back; then the vendor's `report` ([name, limit, remaining, resets_at]
    each, any of the three None) is learned, and a 429's pause recorded."""
    names: dict[str, list[Any]] = entry.setdefault("n", {})
    for name, gen in snap.items():
        s = names.get(name)
        if s is None:
            continue
        if s[2] and now >= s[2] + LATE:
            _roll(s, now)
        if s[3] == gen:
            s[1] = min(s[0], s[1] + needs.get(name, 0) - used.get(name, 0))
    for name, limit, remaining, resets_at in report:
        if limit is None:
            continue  # a remaining count without its limit cannot be refilled
        s = names.get(name)
        if s is None:
            wait = resets_at - now if resets_at else 0.0
            avail = limit if remaining is None else remaining
            names[name] = [limit, avail, resets_at or now + PERIOD, 1, max(wait, 0.0)]
            continue
        s[0] = limit
        if resets_at:
            s[4] = max(s[4], resets_at - now)
        ended = s[2]
        if ended and now >= ended + LATE:
            _roll(s, now)
            if resets_at and resets_at <= ended + SLACK:
                continue  # a report on the window that just ended
        if remaining is not None:
            # Never more than the vendor says is left: usage outside this store shows.
            # (Not less either: calls sent since the report are in our count already.)
            s[1] = min(s[1], remaining)
        if resets_at:
            s[2] = resets_at
    if pause_until > entry.get("p", 0.0):
        entry["p"] = pause_until


def pause(entry: Entry, until: float, field: str = "p") -> None:
    """Pause the key (`p`: every call waits) or cool it (`c`: routes pass it over) until
    `until`; a later pause is never shortened."""
    if until > entry.get(field, 0.0):
        entry[field] = until


def budget_admit(spent: dict[str, float], asks: list[list[Any]]) -> list[Any] | None:
    """Reserve each ask ([name, cap, worst case]) or none: None when all fit, else [the
    first name that does not, what is left of it]."""
    for name, cap, worst in asks:
        left = cap - spent.get(name, 0.0)
        if worst > left:
            return [name, left]
    for name, _, worst in asks:
        spent[name] = spent.get(name, 0.0) + worst
    return None


def budget_settle(spent: dict[str, float], settles: list[list[Any]]) -> None:
    """Each [name, reserved, actual]: the reservation becomes the exact cost."""
    for name, reserved, actual in settles:
        spent[name] = spent.get(name, 0.0) - reserved + actual
