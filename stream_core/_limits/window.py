"""The limiter's arithmetic on one key's state: admit, settle, learn from a report, pause.

One state per key (provider, base URL, key hash, model), a JSON-able dict, so the same
functions serve the in-process store and the file store, and `redis.lua` is a line-by-line
port of them (the store tests run one scenario table through all three):

    {"p": paused until (Unix time), "s": when that pause was last asked for,
     "c": cooling until (routes),
     "n": {limit name: [limit, available, resets_at, generation, period]}}

`available` counts down as calls are admitted (each reserves its need) and is set whole
again when `resets_at` passes (a new generation); a vendor's report can only lower it (to
its `remaining`): our own count already holds every call sent since the report was made,
so a lower figure means usage this store did not see.
A settlement gives back what a call reserved and did not use, in the generation it was
reserved in only. `period` is the longest reset wait seen: the next window's reset when a
window rolls before the vendor has said (`PERIOD` while none has been seen). Nothing here
sleeps or does I/O.

Nothing a vendor says or a store holds is believed past `bounds.max_pause`: a pause, a
reset or a period further away is clamped to it, and `check` range-checks an entry read
back from a store (a value that is not a finite number is dropped). A normal answer
(`settle`'s `answered_at`) received after the key's last 429 lifts that 429's pause.
Budget reservations (`budget_admit`) carry an expiry: one never settled (a worker killed
mid-call) is given back when it passes.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "LATE",
    "MAX_HOLD",
    "MAX_PAUSE",
    "PERIOD",
    "POLL",
    "RESERVATION_TTL",
    "SLACK",
    "TALLY_TTL",
    "admit",
    "bounds",
    "budget_admit",
    "budget_expire",
    "budget_settle",
    "check",
    "forgive",
    "number",
    "pause",
    "settle",
    "spent_of",
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

MAX_PAUSE = 300.0
"""Seconds: the longest pause, reset or window learned from a vendor is believed, by
default (`configure_limits(max_pause=...)`): a `Retry-After: 1000000000`, a reset in 2999
or milliseconds sent as seconds cost at most this long."""

RESERVATION_TTL = 3600.0
"""Seconds a budget reservation is held when its call says nothing shorter: one never
settled (its worker killed) is given back after it."""

MAX_HOLD = 14 * 86_400.0
"""Seconds: the longest a reservation made with `hold_budget` may be held (a vendor's
batch window is 24 hours to 7 days, plus a margin to collect in). Settled ids are
remembered this long, so a second settlement of the same reservation changes nothing."""

TALLY_TTL = 30 * 86_400.0
"""Seconds a tally outlives its last change."""


class _Bounds:
    __slots__ = ("max_pause",)

    def __init__(self) -> None:
        self.max_pause = MAX_PAUSE


bounds = _Bounds()
"""The process's bounds, set by `configure_limits`; every store reads them."""

Entry = dict[str, Any]
Snapshot = dict[str, int]
"""Per limit name: the generation (window) the call's reservation was made in."""


def number(x: Any) -> bool:
    """A finite int or float (not a bool, not NaN or an infinity)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and x == x and abs(x) != math.inf


def check(entry: Any, now: float) -> Entry | None:
    """An entry read from a store, made safe to use, in place: None when it is not an
    entry at all; a pause, cooldown or reset past `now + max_pause` is brought to it, a
    period to at most `max_pause`, an available count to at most its limit, and a field
    or limit that is not a number is dropped."""
    if not isinstance(entry, dict):
        return None
    far = now + bounds.max_pause
    for field in ("p", "s", "c"):
        if field in entry:
            x = entry[field]
            if not number(x):
                del entry[field]
            elif x > far:
                entry[field] = far
    names = entry.get("n")
    if names is None:
        return entry
    if not isinstance(names, dict):
        del entry["n"]
        return entry
    for name in list(names):
        s = names[name]
        if (
            not isinstance(s, list)
            or len(s) != 5
            or not all(number(x) for x in s)
            or s[0] < 0
            or s[2] < 0
        ):
            del names[name]
            continue
        s[1] = min(s[1], s[0])
        if s[2] > far + LATE:
            s[2] = far
        s[4] = min(max(s[4], 0.0), bounds.max_pause)
    return entry


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
    answered_at: float | None = None,
) -> None:
    """The end of an attempt: what it reserved (`needs`, in `snap`'s generations) less what
    it used goes back; then the vendor's `report` ([name, limit, remaining, resets_at]
    each, any of the three None) is learned, and a 429's pause recorded (at most
    `max_pause` on). `answered_at`: when a normal answer arrived, if one did (`forgive`)."""
    far = now + bounds.max_pause
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
        if resets_at and resets_at > far:
            resets_at = far  # a reset in 2999 is a window of `max_pause` at most
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
    if pause_until:
        pause(entry, min(pause_until, far))
        entry["s"] = now
    elif answered_at is not None:
        forgive(entry, answered_at)


def forgive(entry: Entry, answered_at: float) -> None:
    """A normal answer that arrived (`answered_at`) after the key's last 429 lifts its
    pause: the vendor serves again."""
    if entry.get("p", 0.0) and answered_at > entry.get("s", 0.0):
        entry.pop("p", None)
        entry.pop("s", None)


def pause(entry: Entry, until: float, field: str = "p") -> None:
    """Pause the key (`p`: every call waits) or cool it (`c`: routes pass it over) until
    `until`; a later pause is never shortened."""
    if until > entry.get(field, 0.0):
        entry[field] = until


def spent_of(spent: dict[str, float], name: str) -> float:
    """What a budget has spent, as a store holds it: a negative or non-number is 0."""
    x = spent.get(name, 0.0)
    if not number(x) or x < 0:
        spent[name] = x = 0.0
    return float(x)


def _held(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and number(v[0]) and number(v[1])


def budget_expire(
    spent: dict[str, float],
    held: dict[str, Any],
    name: str,
    now: float,
    settled: dict[str, Any] | None = None,
) -> None:
    """Give back the reservations on `name` that were never settled in time (and forget
    the settled ids remembered past their time)."""
    mine = held.get(name)
    if not isinstance(mine, dict):
        held.pop(name, None)
    else:
        for rid in [r for r, v in mine.items() if not (_held(v) and v[1] > now)]:
            v = mine.pop(rid)
            if _held(v):
                spent[name] = spent_of(spent, name) - v[0]
        if not mine:
            del held[name]
    if settled is None:
        return
    done = settled.get(name)
    if not isinstance(done, dict):
        settled.pop(name, None)
        return
    for rid in [r for r, until in done.items() if not (number(until) and until > now)]:
        del done[rid]
    if not done:
        del settled[name]


def _known(rid: Any, name: str, held: dict[str, Any], settled: dict[str, Any] | None) -> bool:
    """Whether reservation `rid` on budget `name` is held, or was settled (and is still
    remembered): holding it again reserves nothing."""
    for table in (held, settled):
        mine = None if table is None else table.get(name)
        if isinstance(mine, dict) and rid in mine:
            return True
    return False


def budget_admit(
    spent: dict[str, float],
    asks: list[list[Any]],
    now: float = 0.0,
    held: dict[str, Any] | None = None,
    settled: dict[str, Any] | None = None,
) -> list[Any] | None:
    """Reserve each ask ([name, cap, worst case], and optionally the reservation's id and
    seconds it is held) or none: None when all fit, else [the first name that does not,
    what is left of it]. A reservation with an id is kept in `held` until settled or
    expired; an id already held (or settled, in `settled`) is not reserved again."""
    fresh = asks
    if held is not None:
        for ask in asks:
            budget_expire(spent, held, ask[0], now, settled)
        fresh = [a for a in asks if len(a) <= 4 or not _known(a[3], a[0], held, settled)]
    for name, cap, worst, *_ in fresh:
        left = cap - spent_of(spent, name)
        if worst > left:
            return [name, left]
    for ask in fresh:
        name, worst = ask[0], ask[2]
        spent[name] = spent.get(name, 0.0) + worst
        if held is not None and len(ask) > 4:
            held.setdefault(name, {})[ask[3]] = [worst, now + ask[4]]
    return None


def budget_settle(
    spent: dict[str, float],
    settles: list[list[Any]],
    held: dict[str, Any] | None = None,
    settled: dict[str, Any] | None = None,
    now: float = 0.0,
) -> None:
    """Each [name, reserved, actual] (and optionally the reservation's id, and seconds the
    id is remembered as settled): the reservation becomes the exact cost; one already given
    back (expired) adds the exact cost only. An id remembered as settled (in `settled`)
    changes nothing: a second settlement of one reservation is a no-op."""
    for name, reserved, actual, *rest in settles:
        if rest and held is not None:
            rid = rest[0]
            keep = rest[1] if len(rest) > 1 and settled is not None else None
            if keep is not None:
                done = settled.get(name) if settled is not None else None
                if isinstance(done, dict) and number(done.get(rid)) and done[rid] > now:
                    continue  # settled before: nothing twice
            mine = held.get(name)
            if not isinstance(mine, dict) or mine.pop(rid, None) is None:
                reserved = 0.0
            elif not mine:
                del held[name]
            if keep is not None and settled is not None:
                if not isinstance(settled.get(name), dict):
                    settled[name] = {}
                settled[name][rid] = now + keep
        spent[name] = spent_of(spent, name) - reserved + actual
