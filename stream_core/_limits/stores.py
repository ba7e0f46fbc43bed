"""Where the limiter's state lives: this process (`MemoryStore`), a file on one host
(`file_store.FileStore`: many worker processes, no server) or Redis
(`redis_store.RedisStore`).

Every store does the same four things atomically (`window` has the arithmetic): admit a
call (rate limits and budgets at once), settle it (a `LimitSettlement`), cool a deployment
for routes, say what a budget has spent, and forget keys (`clear`). Times are Unix times
from the caller's clock (`now`); the in-process and file stores are on one host, so that
clock is theirs, while Redis turns them into waits from `now` and keeps its own `TIME`
(a worker whose clock is wrong moves nobody else's pauses). Whatever a store reads back
is range-checked (`window.check`), never believed past `window.bounds.max_pause`.
"""

from __future__ import annotations

import math
import time
from typing import Any

from . import window
from .window import Entry, Snapshot

__all__ = ["LimitSettlement", "LimitStore", "MemoryStore", "model_keys"]


def model_keys(key: str, match: tuple[str, str] | None) -> bool:
    """Whether limit key `key` is one `clear(match)` forgets: every key when `match` is
    None, else those of (provider, model id), whatever their base URL and API key."""
    return match is None or (key.startswith(match[0] + "|") and key.endswith("|" + match[1]))


class LimitSettlement:
    """The end of one admitted attempt, as a store applies it: what it reserved (`needs`,
    in the generations `snap` names), what it `used`, the vendor's `report` ([name,
    limit, remaining, resets_at] each), the Unix time a 429 pauses the key until (0:
    none), each budget's `settles` ([name, reserved, actual, reservation id] each), and
    `answered_ago`: how many seconds ago a normal (2xx) answer arrived, None if none did (it
    lifts a pause asked for before it)."""

    __slots__ = ("answered_ago", "key", "needs", "pause_until", "report", "settles", "snap", "used")

    def __init__(
        self,
        key: str,
        *,
        snap: Snapshot | None = None,
        needs: dict[str, int] | None = None,
        used: dict[str, int] | None = None,
        report: list[list[Any]] | None = None,
        pause_until: float = 0.0,
        settles: list[list[Any]] | None = None,
        answered_ago: float | None = None,
    ) -> None:
        self.key = key
        self.answered_ago = answered_ago
        self.snap: Snapshot = {} if snap is None else snap
        self.needs: dict[str, int] = {} if needs is None else needs
        self.used: dict[str, int] = {} if used is None else used
        self.report: list[list[Any]] = [] if report is None else report
        self.pause_until = pause_until
        self.settles: list[list[Any]] = [] if settles is None else settles


class LimitStore:
    """What a store does; every method is atomic for everyone sharing the store."""

    name = "store"
    """How the store is named in log lines (never a password)."""

    async def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        """(seconds to wait or 0, the snapshot, the budget that does not fit or None)."""
        raise NotImplementedError

    async def settle(self, settlement: LimitSettlement, now: float) -> None:
        """Apply the end of an admitted attempt (see `LimitSettlement`)."""
        raise NotImplementedError

    async def cool(
        self,
        key: str,
        until: float,
        now: float | None = None,
        *,
        started: float | None = None,
        backoff: tuple[float, float] | None = None,
        reset: bool = False,
    ) -> tuple[float, int]:
        """A route's deployment (limit key `key`) failed: one more failure in a row
        (none when the attempt was sent, `started`, before the last one was counted: the
        same burst), and it cools until the later of its deadline, `until` and, with
        `backoff` (base, cap), the last failure in a row plus `min(cap, base * 2 **
        (failures - 1))`. With `reset`, it served: its failures in a row are forgotten
        (unless it was sent before the last of them). Returns (its deadline, its failures
        in a row). Times are Unix times; `now` defaults to the clock's."""
        raise NotImplementedError

    async def cooling(self, keys: list[str]) -> list[float]:
        """Each key's cooldown deadline (0: none)."""
        raise NotImplementedError

    async def spent(self, name: str) -> float:
        raise NotImplementedError

    async def clear(self, match: tuple[str, str] | None) -> None:
        """Forget the limits, pauses and cooldowns of every key `model_keys(key, match)`
        names (budgets are kept)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release connections (the in-process and file stores hold none)."""


class _Tables:
    """The state of every key and budget, as plain dicts (the in-process and file stores)."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        data = data if data is not None else {}
        for part in ("keys", "budgets", "held"):
            if not isinstance(data.get(part), dict):
                data[part] = {}  # a store's file holding something else: start it over
        self.keys: dict[str, Entry] = data["keys"]
        self.spent: dict[str, float] = data["budgets"]
        self.held: dict[str, Any] = data["held"]
        """Budget reservations not yet settled: {budget: {id: [amount, expires at]}}."""
        self.data = data

    def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        entry = self.keys.get(key)
        if entry is not None and window.check(entry, now) is None:
            del self.keys[key]
            entry = None
        wait, snap = (0.0, {}) if entry is None else window.admit(entry, needs, now, route)
        if wait > 0:
            return wait, snap, None
        if asks:
            short = window.budget_admit(self.spent, asks, now, self.held)
            if short is not None:
                if snap and entry is not None:
                    # Give the rate reservation back: the call is not sent.
                    window.settle(entry, snap, {}, needs, [], 0.0, now)
                return 0.0, {}, short
        return 0.0, snap, None

    def settle(self, s: LimitSettlement, now: float) -> None:
        answered = None if s.answered_ago is None else now - s.answered_ago
        if s.snap or s.report or s.pause_until:
            entry = self.keys.get(s.key)
            if entry is None or window.check(entry, now) is None:
                entry = self.keys[s.key] = {}
            window.settle(entry, s.snap, s.used, s.needs, s.report, s.pause_until, now, answered)
        elif answered is not None:
            entry = self.keys.get(s.key)
            if isinstance(entry, dict):
                window.forgive(entry, answered)
        if s.settles:
            window.budget_settle(self.spent, s.settles, self.held)

    def cool(
        self,
        key: str,
        until: float,
        now: float,
        started: float | None,
        backoff: tuple[float, float] | None,
        reset: bool,
    ) -> tuple[float, int]:
        entry = self.keys.get(key)
        if not isinstance(entry, dict):
            if reset:
                return 0.0, 0  # nothing to forget: no write
            entry = self.keys[key] = {}
        return cool_entry(entry, until, now, started, backoff, reset)

    def clear(self, match: tuple[str, str] | None) -> None:
        for key in [k for k in self.keys if model_keys(k, match)]:
            del self.keys[key]

    def spent_of(self, name: str) -> float:
        return window.spent_of(self.spent, name)

    def prune(self, now: float) -> None:
        """Forget keys with nothing left to say (every reset and pause past an hour ago)."""
        old = now - 3600
        for key in [k for k, e in self.keys.items() if _stale(e, old)]:
            del self.keys[key]


def _stale(entry: Entry, old: float) -> bool:
    if not isinstance(entry, dict):
        return True
    try:
        if entry.get("p", 0.0) > old or entry.get("c", 0.0) > old:
            return False
        return all(s[2] and s[2] < old for s in entry.get("n", {}).values())
    except (TypeError, IndexError, AttributeError):
        return True  # not an entry: nothing to keep


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def cool_entry(
    entry: Entry,
    until: float,
    now: float,
    started: float | None,
    backoff: tuple[float, float] | None,
    reset: bool,
) -> tuple[float, int]:
    """`LimitStore.cool` on one key's state: `r` its failures in a row, `b` when the last
    was counted (`a`: the one before), `c` its deadline (routes pass it over until then; 0
    once past)."""
    found: Any = entry.get("r")
    row = min(int(found), 64) if _finite(found) and found > 0 else 0
    found = entry.get("b")
    # A time a little ahead of `now` is another caller's `now`, read just later but
    # applied first; one far ahead is not a time.
    began: float = found if _finite(found) and found <= now + 60 else 0.0
    found = entry.get("a")
    prior: float = found if _finite(found) and found <= began else 0.0
    if "c" in entry and not _finite(entry["c"]):
        del entry["c"]  # not a deadline: none
    same = started is not None and started < began  # sent before the last was counted
    if reset:
        if row and not same:
            row = entry["r"] = 0
        elif row > 1 and started is not None and 0 < prior <= started:
            # It answered after the failure before the last: the last stands alone.
            row = entry["r"] = 1
    else:
        if not same:
            row, began, entry["a"] = row + 1, now, began
            entry["r"], entry["b"] = row, began
        if backoff is not None:
            base, cap = backoff
            until = max(until, began + min(cap, base * 2.0 ** min(max(row, 1) - 1, 30)))
        window.pause(entry, until, "c")
    until = float(entry.get("c", 0.0))
    return (until if until > now else 0.0), row


class MemoryStore(LimitStore):
    """This process only (the default): every call on every event loop of the process."""

    name = "in-process"

    def __init__(self) -> None:
        self.tables = _Tables()

    async def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        return self.tables.admit(key, needs, asks, now, route)

    async def settle(self, settlement: LimitSettlement, now: float) -> None:
        self.settle_now(settlement, now)

    def settle_now(self, settlement: LimitSettlement, now: float) -> None:
        """`settle` without an await: this store does no I/O."""
        self.tables.settle(settlement, now)
        if len(self.tables.keys) > 10_000:
            self.tables.prune(now)

    async def cool(
        self,
        key: str,
        until: float,
        now: float | None = None,
        *,
        started: float | None = None,
        backoff: tuple[float, float] | None = None,
        reset: bool = False,
    ) -> tuple[float, int]:
        now = time.time() if now is None else now
        return self.tables.cool(key, until, now, started, backoff, reset)

    async def cooling(self, keys: list[str]) -> list[float]:
        return [self.tables.keys.get(k, {}).get("c", 0.0) for k in keys]

    async def spent(self, name: str) -> float:
        return self.tables.spent_of(name)

    async def clear(self, match: tuple[str, str] | None) -> None:
        self.tables.clear(match)
