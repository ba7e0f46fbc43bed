"""Where the limiter's state lives: this process (`MemoryStore`), a file on one host
(`file_store.FileStore`: many worker processes, no server) or Redis
(`redis_store.RedisStore`).

Every store does the same four things atomically (`window` has the arithmetic): admit a
call (rate limits and budgets at once), settle it (a `LimitSettlement`), cool a deployment
for routes, and say what a budget has spent. Times are Unix times from the caller's clock.
"""

from __future__ import annotations

from typing import Any

from . import window
from .window import Entry, Snapshot

__all__ = ["LimitStore", "MemoryStore", "LimitSettlement"]


class LimitSettlement:
    """The end of one admitted attempt, as a store applies it: what it reserved (`needs`,
    in the generations `snap` names), what it `used`, the vendor's `report` ([name,
    limit, remaining, resets_at] each), the Unix time a 429 pauses the key until (0:
    none), and each budget's `settles` ([name, reserved, actual] each)."""

    __slots__ = ("key", "needs", "pause_until", "report", "settles", "snap", "used")

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
    ) -> None:
        self.key = key
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

    async def cool(self, key: str, until: float) -> None:
        raise NotImplementedError

    async def cooling(self, keys: list[str]) -> list[float]:
        raise NotImplementedError

    async def spent(self, name: str) -> float:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release connections (the in-process and file stores hold none)."""


class _Tables:
    """The state of every key and budget, as plain dicts (the in-process and file stores)."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        data = data if data is not None else {}
        self.keys: dict[str, Entry] = data.setdefault("keys", {})
        self.spent: dict[str, float] = data.setdefault("budgets", {})
        self.data = data

    def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        entry = self.keys.get(key)
        wait, snap = (0.0, {}) if entry is None else window.admit(entry, needs, now, route)
        if wait > 0:
            return wait, snap, None
        if asks:
            short = window.budget_admit(self.spent, asks)
            if short is not None:
                if snap and entry is not None:
                    # Give the rate reservation back: the call is not sent.
                    window.settle(entry, snap, {}, needs, [], 0.0, now)
                return 0.0, {}, short
        return 0.0, snap, None

    def settle(self, s: LimitSettlement, now: float) -> None:
        if s.snap or s.report or s.pause_until:
            entry = self.keys.setdefault(s.key, {})
            window.settle(entry, s.snap, s.used, s.needs, s.report, s.pause_until, now)
        if s.settles:
            window.budget_settle(self.spent, s.settles)

    def prune(self, now: float) -> None:
        """Forget keys with nothing left to say (every reset and pause past an hour ago)."""
        old = now - 3600
        for key in [k for k, e in self.keys.items() if _stale(e, old)]:
            del self.keys[key]


def _stale(entry: Entry, old: float) -> bool:
    if entry.get("p", 0.0) > old or entry.get("c", 0.0) > old:
        return False
    return all(s[2] and s[2] < old for s in entry.get("n", {}).values())


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

    async def cool(self, key: str, until: float) -> None:
        window.pause(self.tables.keys.setdefault(key, {}), until, "c")

    async def cooling(self, keys: list[str]) -> list[float]:
        return [self.tables.keys.get(k, {}).get("c", 0.0) for k in keys]

    async def spent(self, name: str) -> float:
        return self.tables.spent.get(name, 0.0)

    def charge(self, settles: list[list[Any]]) -> None:
        """This process's own count of its spend ([name, reserved, actual] each): what it
        enforces while a shared store is down."""
        window.budget_settle(self.tables.spent, settles)
