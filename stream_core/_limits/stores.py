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

import copy
import math
import time
from collections.abc import Mapping
from typing import Any

from . import window
from .window import Entry, Snapshot

__all__ = [
    "MAX_NAME",
    "LimitSettlement",
    "LimitStore",
    "MemoryStore",
    "TallyOverflow",
    "checked_tally",
    "model_keys",
]

MAX_NAME = 200
"""Characters: the longest tally name (and field name) a store keeps."""

MAX_FIELDS = 64
"""The most fields one `tally` call adds to."""


class TallyOverflow(ValueError):
    """A tally's sum would not be a finite number: nothing was added (the store is fine)."""


def _name(x: Any, what: str) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{what} must be a string, not {type(x).__name__}")
    if not x or len(x) > MAX_NAME or not x.isprintable():
        raise ValueError(
            f"{what} must be 1 to {MAX_NAME} printable characters, not one of {len(x)}"
        )
    return x


def checked_tally(name: Any, deltas: Any) -> dict[str, float]:
    """What `LimitStore.tally` adds, checked: a name of 1 to `MAX_NAME` printable
    characters, at most `MAX_FIELDS` fields named so, each a finite number."""
    _name(name, "a tally's name")
    if not isinstance(deltas, Mapping):
        raise TypeError(f"a tally's deltas must be a mapping, not {type(deltas).__name__}")
    if len(deltas) > MAX_FIELDS:
        raise ValueError(f"a tally adds to at most {MAX_FIELDS} fields at once, not {len(deltas)}")
    out: dict[str, float] = {}
    for field, delta in deltas.items():
        _name(field, "a tally's field")
        if not window.number(delta):
            raise ValueError(f"tally field {field!r}: {delta!r} is not a finite number")
        try:
            out[field] = float(delta)
        except OverflowError:
            raise ValueError(f"tally field {field!r}: too large a number") from None
    return out


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

    async def clear_budgets(self, name: str | None) -> None:
        """Forget budget `name`'s spend and reservations (every budget's with None)."""
        raise NotImplementedError

    async def tally(self, name: str, deltas: Mapping[str, float], now: float) -> None:
        """Add each of `deltas` to the field of that name of tally `name` (a new field
        starts at 0), all at once; the tally is kept `window.TALLY_TTL` after its last
        change. Checked first (`checked_tally`): nothing is added when any is wrong, or
        when a sum would not be a finite number."""
        raise NotImplementedError

    async def tallies(self, name: str) -> dict[str, float]:
        """Tally `name`'s fields ({} when there is none)."""
        raise NotImplementedError

    async def contents(self) -> dict[str, Any]:
        """What the store holds, for `inspect_limits`: {"now": the store's clock, "keys":
        {key: state}, "budgets": {name: spent}, "held": {name: {id: [amount, expires at]}},
        "tallies": [names]} (read back as any store reads: range-checked by the reader)."""
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

    def _part(self, part: str) -> dict[str, Any]:
        """A part only some stores have (made when first written)."""
        found = self.data.get(part)
        if not isinstance(found, dict):
            found = self.data[part] = {}
        return found

    def _have(self, part: str) -> dict[str, Any] | None:
        """A part only some stores have, if this one has it (a look writes nothing)."""
        found = self.data.get(part)
        return found if isinstance(found, dict) else None

    @property
    def settled(self) -> dict[str, Any]:
        """Reservations settled with an id to remember: {budget: {id: remembered until}}."""
        return self._part("settled")

    @property
    def tally_table(self) -> dict[str, Any]:
        """{name: [{field: value}, kept until]}."""
        return self._part("tallies")

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
            short = window.budget_admit(self.spent, asks, now, self.held, self._have("settled"))
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
            keep = any(len(x) > 4 for x in s.settles)
            window.budget_settle(
                self.spent, s.settles, self.held, self.settled if keep else None, now
            )

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

    def spent_of(self, name: str, now: float | None = None) -> float:
        """What budget `name` has spent; with `now`, once reservations past it are given
        back."""
        if now is not None:
            window.budget_expire(self.spent, self.held, name, now, self._have("settled"))
        return window.spent_of(self.spent, name)

    def clear_budgets(self, name: str | None) -> None:
        for table in (self.spent, self.held, self.data.get("settled")):
            if not isinstance(table, dict):
                continue
            if name is None:
                table.clear()
            else:
                table.pop(name, None)

    def tally(self, name: str, deltas: dict[str, float], now: float) -> None:
        table = self.tally_table
        fields = self.tallies_of(name, now)
        for field, delta in deltas.items():
            total = fields.get(field, 0.0) + delta
            if not math.isfinite(total):
                raise TallyOverflow(f"tally {name!r}: field {field!r} would not be a finite number")
            fields[field] = total  # a copy: nothing is written until all are known
        if len(table) > 1000:
            for old in [n for n, v in table.items() if not _live(v, now)]:
                del table[old]
        table[name] = [fields, now + window.TALLY_TTL]

    def tallies_of(self, name: str, now: float) -> dict[str, float]:
        found: Any = (self._have("tallies") or {}).get(name)
        if not _live(found, now):
            return {}
        return {f: float(v) for f, v in found[0].items() if isinstance(f, str) and window.number(v)}

    def contents(self, now: float) -> dict[str, Any]:
        for name in list(self.held):
            window.budget_expire(self.spent, self.held, name, now, self._have("settled"))
        return copy.deepcopy(
            {
                "now": now,
                "keys": self.keys,
                "budgets": {n: window.spent_of(self.spent, n) for n in list(self.spent)},
                "held": self.held,
                "tallies": sorted(
                    n for n, v in (self._have("tallies") or {}).items() if _live(v, now)
                ),
            }
        )

    def prune(self, now: float) -> None:
        """Forget keys with nothing left to say (every reset and pause past an hour ago)."""
        old = now - 3600
        for key in [k for k, e in self.keys.items() if _stale(e, old)]:
            del self.keys[key]


def _live(found: Any, now: float) -> bool:
    """A tally as kept: [fields, kept until], not past."""
    return (
        isinstance(found, list)
        and len(found) == 2
        and isinstance(found[0], dict)
        and window.number(found[1])
        and found[1] > now
    )


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
        return self.tables.spent_of(name, time.time())

    async def clear(self, match: tuple[str, str] | None) -> None:
        self.tables.clear(match)

    async def clear_budgets(self, name: str | None) -> None:
        self.tables.clear_budgets(name)

    async def tally(self, name: str, deltas: Mapping[str, float], now: float) -> None:
        self.tables.tally(name, checked_tally(name, deltas), now)

    async def tallies(self, name: str) -> dict[str, float]:
        return self.tables.tallies_of(name, time.time())

    async def contents(self) -> dict[str, Any]:
        return self.tables.contents(time.time())
