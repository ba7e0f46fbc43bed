"""The limiter every call goes through: where its state lives (`configure_limits`), the
key a call is limited under, what it reserves, and the fallback when a shared store fails.

On by default, in-process and open: a key (provider, base URL, a hash of the API key,
model) limits nothing until a vendor's headers report a limit, a 429 pauses it, or a
budget is configured. The pipeline's admission stage (`_pipeline/admission.py`) calls
`admit` before each attempt is sent and `settle` when it ends.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import anyio

from . import holds, redact, stores, window
from .file_store import FileStore
from .flow import Flow
from .keys import known_key, limit_key
from .stores import LimitSettlement, LimitStore, MemoryStore, TallyOverflow, model_keys
from .view import LimitsView, build
from .window import Snapshot

__all__ = [
    "COUNTS_CACHE_READS",
    "GLOBAL_BUDGET",
    "STORE_RETRY",
    "Flow",
    "LimitsView",
    "Ticket",
    "admit",
    "budget_spent",
    "clear_limits",
    "config",
    "configure_limits",
    "flow",
    "hold_budget",
    "inspect_limits",
    "known_key",
    "limit_key",
    "settle",
    "settle_budget",
    "settle_local",
    "share_cool",
    "tallies",
    "tally",
]

logger = logging.getLogger("stream_core")

GLOBAL_BUDGET = "budget_usd"
"""The name `configure_limits(budget_usd=...)`'s budget is kept and reported under."""

COUNTS_CACHE_READS: Mapping[str, bool] = {"anthropic-messages": False}
"""Per API, whether its input-token limits count cache reads (Anthropic's do not: its
input limit counts input and cache writes). Unlisted APIs count them."""

_RETRY_STORE = STORE_RETRY = 1.0
"""Seconds a failed shared store is left alone before it is tried again."""


class _Config:
    __slots__ = (
        "budget_usd",
        "budgets",
        "down_until",
        "enabled",
        "local",
        "max_pause",
        "store",
        "timeout",
        "warned",
    )

    def __init__(self) -> None:
        self.enabled = True
        self.max_pause = window.MAX_PAUSE
        self.local = MemoryStore()
        self.store: LimitStore = self.local
        self.budget_usd: float | None = None
        self.budgets: dict[str, float] = {}
        self.timeout = 0.25
        self.down_until = 0.0
        self.warned = False


config = _Config()


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TypeError(f"{what} must be a number, not {value!r}")
    if value < 0 or value == float("inf"):
        raise ValueError(f"{what} must be a finite number of at least 0, not {value!r}")
    return float(value)


def configure_limits(
    *,
    store: str | os.PathLike[str] | LimitStore | None = None,
    budget_usd: float | None = None,
    budgets: Mapping[str, float] | None = None,
    enabled: bool = True,
    prefix: str = "stream_core",
    timeout: float = 0.25,
    max_pause: float = window.MAX_PAUSE,
) -> None:
    """Set where rate limits, pauses, cooldowns and budgets are kept, for every call of
    the process that starts afterwards.

    `store`: None (the default) for this process only; a path (or `file:///path`) for a
    file shared by the processes of one host; `redis://host:port/db` (`rediss://`,
    `unix://`) for every process that names the same Redis (the `redis` extra). Keys are
    kept under `prefix`. A shared store that fails or takes longer than `timeout` seconds
    never fails a call: the process limits alone, says so once in the log, and rejoins
    when the store answers again.

    `budget_usd`: the most all calls sharing the store may spend, in USD; `budgets`: named
    budgets a call draws on with `StreamOptions.budget`. A call is admitted only if its
    worst case fits (its estimated input and `max_tokens` of output at the model's prices),
    and settled to its exact cost; one that cannot fit ends at once with kind `budget`,
    nothing sent. `enabled=False` turns the limiter off (no waits, no budgets).

    `max_pause`: the longest, in seconds, that a pause or a window learned from a vendor
    is believed (300 by default): a 429's `Retry-After`, a reset in its rate-limit
    headers, or any such time read back from the store. A 429's pause is also at most the
    `max_retry_delay` of the call that met it, so by default calls wait it out rather
    than fail; raise both to honour longer pauses. `clear_limits` forgets a key at once.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, not {enabled!r}")
    timeout = _number(timeout, "timeout")
    if timeout == 0:
        raise ValueError("timeout must be more than 0")
    max_pause = _number(max_pause, "max_pause")
    if max_pause == 0:
        raise ValueError("max_pause must be more than 0")
    if not isinstance(prefix, str) or not prefix:
        raise TypeError(f"prefix must be a non-empty string, not {prefix!r}")
    limit = None if budget_usd is None else _number(budget_usd, "budget_usd")
    named: dict[str, float] = {}
    if budgets is not None:
        if not isinstance(budgets, Mapping):
            raise TypeError(f"budgets must be a mapping of name to USD, not {budgets!r}")
        for name, value in budgets.items():
            if not isinstance(name, str) or not name or name == GLOBAL_BUDGET:
                raise ValueError(f"budgets: {name!r} is not a budget name")
            named[name] = _number(value, f"budgets[{name!r}]")
    config.local = MemoryStore()  # starts from nothing: no stale pause, no old spend
    made = _store(store, prefix, timeout)
    config.enabled = enabled
    config.store = made
    config.budget_usd = limit
    config.budgets = named
    config.timeout = timeout
    config.max_pause = window.bounds.max_pause = max_pause
    config.down_until = 0.0
    config.warned = False
    _flows.clear()


def _store(
    store: str | os.PathLike[str] | LimitStore | None, prefix: str, timeout: float
) -> LimitStore:
    if store is None or store == "memory":
        return config.local
    if isinstance(store, LimitStore):
        return store
    if isinstance(store, str):
        if store.startswith(("redis://", "rediss://", "unix://")):
            from .redis_store import RedisStore

            return RedisStore(store, prefix=prefix, timeout=timeout)
        if store.startswith("file://"):
            return FileStore(store[len("file://") :])
        if "://" in store:
            raise ValueError(
                f"store: {store.split('://')[0]}:// is not a store (redis://, file://)"
            )
        return FileStore(store)
    if isinstance(store, os.PathLike):
        return FileStore(store)
    raise TypeError(f"store must be None, a path, a redis:// URL or a LimitStore, not {store!r}")


# --- this process's adaptive concurrency, for keys with no rate-limit headers -------------
# (and its correction to the context estimate: `flow.Flow`)


_flows: dict[str, Flow] = {}


def flow(key: str) -> Flow:
    found = _flows.get(key)
    if found is None:
        found = _flows[key] = Flow()
    return found


# --- tickets: one admitted attempt ---------------------------------------------------------


class Ticket(LimitSettlement):
    """One admitted attempt: what it reserved, where, and what the vendor said of it;
    when it ends, what it used (the `LimitSettlement` its store applies)."""

    __slots__ = ("_answered_at", "asks", "cuts", "estimate", "store")

    def __init__(
        self,
        key: str,
        store: LimitStore,
        needs: dict[str, int],
        snap: Snapshot,
        asks: list[list[Any]],
    ) -> None:
        # The fields of `LimitSettlement` set here, not through its keywords: once per call.
        self.key = key
        self.snap = snap
        self.needs = needs
        self.used = needs  # until it ends: everything it reserved
        self.report = []
        self.pause_until = 0.0
        self.settles = []
        self.answered_ago = None
        self.store = store
        self.asks = asks
        self._answered_at = 0.0
        self.estimate = 0
        """The context estimate, uncorrected (what the flow's `scale` learns from)."""
        self.cuts = 0
        """The flow's cuts when admitted: a 429 on a call sent before a cut cuts nothing."""

    @property
    def answered(self) -> bool:
        """A 2xx response arrived: the vendor counts what it generates."""
        return self._answered_at > 0

    @answered.setter
    def answered(self, value: bool) -> None:
        self._answered_at = time.monotonic() if value else 0.0

    def since_answered(self) -> float:
        """Seconds since the 2xx response arrived (`answered`)."""
        return max(time.monotonic() - self._answered_at, 0.0)


async def _shared(op: str, run: Any) -> tuple[Any, LimitStore]:
    """`run(store)` on the configured store, or on this process's own when that one is
    down: a failure or a timeout switches over (said once in the log), and the store is
    tried again a second later."""
    store = config.store
    local = config.local
    if store is local:
        return await run(local), local
    try:
        return await _on_store(store, op, run), store
    except _StoreDown:
        return await run(local), local


class _StoreDown(Exception):
    """The shared store failed (or is being left alone after failing): `cause` names why."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


async def _on_store(store: LimitStore, op: str, run: Any, *, while_down: bool = False) -> Any:
    """`run(store)` within the store's `timeout`; `_StoreDown` when it fails (said once,
    and the store left alone a second) or, unless `while_down`, while it is left alone."""
    if not while_down and config.down_until > time.monotonic():
        raise _StoreDown("down")
    try:
        with anyio.fail_after(config.timeout):
            result = await run(store)
    except Exception as exc:
        _went_down(store, exc, op)
        raise _StoreDown(type(exc).__name__) from None
    _answered(store)
    return result


def _went_down(store: LimitStore, exc: Exception, op: str) -> None:
    """A shared store failed: leave it alone for a second, and say so once."""
    config.down_until = time.monotonic() + _RETRY_STORE
    if not config.warned:
        config.warned = True
        logger.warning(
            "limit store %s failed (%s: %s) at %s; limiting in this process until "
            "it answers again (calls drawing on a budget wait for it)",
            redact.scrubbed(store.name),
            type(exc).__name__,
            # The error's text without a credential it may echo (a URL, a password).
            redact.scrubbed(str(exc), getattr(store, "hidden", ()))[:200],
            op,
        )


def _answered(store: LimitStore) -> None:
    if config.warned:
        config.warned = False
        logger.warning(
            "limit store %s answers again; limits are shared again", redact.scrubbed(store.name)
        )


async def admit(
    key: str, needs: dict[str, int], asks: list[list[Any]], route: bool
) -> tuple[float, Ticket | None, list[Any] | None]:
    """(0, the ticket, None) once admitted; (seconds to wait, None, None); or (0, None,
    [the budget that cannot fit, what is left of it]), what is left being None when the
    shared store that keeps the budget cannot be reached (`STORE_RETRY` on, try again)."""
    now = time.time()
    local = config.local
    store = config.store
    if store is local:  # the default: no closure, no await that suspends
        wait, snap, short = local.tables.admit(key, needs, asks, now, route)
    else:

        async def run(store: LimitStore) -> tuple[float, Snapshot, list[Any] | None]:
            return await store.admit(key, needs, asks, now, route)

        if not asks:
            (wait, snap, short), store = await _shared("admission", run)
        else:
            # A shared budget is spent only through its store: while the store cannot be
            # reached no process may draw on it (each alone would spend it again).
            try:
                wait, snap, short = await _on_store(store, "admission", run)
            except _StoreDown:
                return 0.0, None, [asks[0][0], None]
    if wait > 0 or short is not None:
        return wait, None, short
    return 0.0, Ticket(key, store, needs, snap, asks), None


def settle_local(ticket: Ticket) -> bool:
    """`settle` when the ticket's store is in this process (no I/O): True when done."""
    store = ticket.store
    if not isinstance(store, MemoryStore):
        return False
    store.settle_now(ticket, time.time())
    return True


async def settle(ticket: Ticket) -> None:
    """The end of an admitted attempt (its `used`, `pause_until` and `settles` filled in),
    in the store that admitted it; never raises (a store that fails keeps the
    reservation: it errs on the safe side)."""
    if settle_local(ticket):
        return
    now = time.time()
    store = ticket.store
    local = config.local
    try:
        with anyio.CancelScope(shield=True), anyio.fail_after(config.timeout):
            await store.settle(ticket, now)
    except Exception as exc:
        logger.debug(
            "limit store %s: settlement lost (%s)", redact.scrubbed(store.name), type(exc).__name__
        )
        if ticket.pause_until:
            local.tables.settle(LimitSettlement(ticket.key, pause_until=ticket.pause_until), now)


async def share_cool(
    key: str,
    until: float,
    *,
    started: float | None = None,
    backoff: tuple[float, float] | None = None,
    reset: bool = False,
) -> tuple[float, int] | None:
    """Tell everyone sharing the store that a route's deployment failed (one more failure
    in a row unless sent, `started`, before the last: it cools until the later of `until`
    and its `backoff`) or, with `reset`, served (see `LimitStore.cool`). Returns the
    store's (deadline, failures in a row), None if it said nothing usable."""
    now = time.time()

    async def run(store: LimitStore) -> Any:
        return await store.cool(key, until, now, started=started, backoff=backoff, reset=reset)

    try:
        found, _ = await _shared("cooldown", run)
    except Exception:  # pragma: no cover - the local store does not fail
        return None
    if not isinstance(found, tuple) or len(found) != 2:
        return None  # a store of an older interface: cooled, no streak known
    return found[0], found[1]


async def budget_spent(name: str | None = None) -> float:
    """USD spent (and reserved by calls in flight) from a budget: the one of
    `configure_limits(budget_usd=...)` by default, else the named one. Raises
    `ConnectionError` when the shared store that keeps it cannot be reached: its spend is
    known only there (never a 0 that is not so)."""
    key = GLOBAL_BUDGET if name is None else name

    async def run(store: LimitStore) -> float:
        return await store.spent(key)

    found: float = await _kept_only(config.store, "budget", f"the spend of budget {key!r}", run)
    return found


async def _kept_only(store: LimitStore, op: str, what: str, run: Any) -> Any:
    """`run(store)` on the configured store, which alone keeps `what`: `ConnectionError`
    when it cannot be reached (never an answer that is not so)."""
    if store is config.local:
        return await run(store)
    try:
        return await _on_store(store, op, run, while_down=True)
    except _StoreDown as down:
        raise ConnectionError(
            f"limit store {redact.scrubbed(store.name)} cannot be reached "
            f"({down.cause}); {what} is kept there"
        ) from None


def _has(store: LimitStore, method: str) -> bool:
    """Whether `store` has `method` of its own (a store of an older interface may not)."""
    return getattr(type(store), method) is not getattr(LimitStore, method)


async def tally(name: str, **deltas: float) -> None:
    """Add to the shared tally `name`, every process sharing the store at once: each
    keyword is a field (a new one starts at 0) and its number is added to it, all fields
    at once (`await tally("eval-7", done=1, failed=0, usd=0.0123)`). For a progress line
    across workers; `tallies(name)` reads it back. The name is 1 to 200 printable
    characters, each number finite (else `ValueError`, nothing added). A tally is kept 30
    days after its last change (`window.TALLY_TTL`). While the shared store cannot be
    reached the count is kept in this process instead (said once in the log): it does
    not reach the shared tally."""
    checked = stores.checked_tally(name, deltas)
    if not checked:
        return
    now = time.time()

    async def run(store: LimitStore) -> TallyOverflow | None:
        try:
            await store.tally(name, checked, now)
        except TallyOverflow as exc:
            return exc  # the caller's numbers, not the store, are at fault
        return None

    store = config.store
    if store is not config.local and not _has(store, "tally"):
        store = config.local
    found = await run(store) if store is config.local else (await _shared("tally", run))[0]
    if found is not None:
        raise found


async def tallies(name: str) -> dict[str, float]:
    """The fields of the shared tally `name` ({} when there is none). Raises
    `ConnectionError` when the shared store that keeps it cannot be reached."""
    stores.checked_tally(name, {})

    async def run(store: LimitStore) -> dict[str, float]:
        return await store.tallies(name)

    store = config.store
    if not _has(store, "tallies"):
        store = config.local
    found: dict[str, float] = await _kept_only(store, "tallies", f"tally {name!r}", run)
    return found


async def hold_budget(asks: list[tuple[str | None, float, str, float]]) -> list[Any] | None:
    """Reserve budget for work billed later (a vendor batch), all asks or none. Each ask
    is (the budget's name, None for `configure_limits(budget_usd=...)`'s; the worst case
    in USD; an id of yours, 1 to 200 characters; seconds held, at most 14 days,
    `window.MAX_HOLD`). Returns None when all fit, else [the first budget that does not
    ("budget_usd": the global one), USD left]. Held in the configured store, for every
    process sharing it, until `settle_budget` settles it or its time passes (its settler
    killed). An id already held or settled is not reserved again (a restarted process may
    hold again). An ask on the global budget while none is configured holds nothing; an
    unknown name is a `ValueError`. `ConnectionError` when the shared store cannot be
    reached: a budget is never spent where it cannot be counted."""
    made = holds.hold_asks(asks, config.budget_usd, config.budgets, GLOBAL_BUDGET)
    if not made or not config.enabled:
        return None
    now = time.time()

    async def run(store: LimitStore) -> tuple[float, Snapshot, list[Any] | None]:
        return await store.admit(holds.HOLD_KEY, {}, made, now, False)

    _, _, short = await _kept_only(config.store, "budget hold", "the budget", run)
    return None if short is None else list(short)


async def settle_budget(settles: list[tuple[str | None, float, float, str]]) -> None:
    """Settle reservations `hold_budget` made, from any process sharing the store: each
    is (the budget's name or None, USD reserved, the actual cost, the id). The reservation
    becomes the actual cost; one already given back (expired) adds the actual cost. A
    second settlement of an id changes nothing (settled ids are remembered 14 days), so it
    may be retried. `ConnectionError` when the shared store cannot be reached."""
    made = holds.settle_items(settles, config.budget_usd, config.budgets, GLOBAL_BUDGET)
    if not made or not config.enabled:
        return
    now = time.time()
    settlement = LimitSettlement(holds.HOLD_KEY, settles=made)

    async def run(store: LimitStore) -> None:
        await store.settle(settlement, now)

    await _kept_only(config.store, "budget settlement", "the budget", run)


async def inspect_limits() -> LimitsView:
    """What the limiter holds, in the configured store (for every process sharing it):
    per limit key its learned limits and what remains of them, a 429's pause, a route's
    cooldown and failures in a row, and this process's concurrency cap; each budget's
    spend, cap and reservations held; the tallies' names. No credential is shown: a key
    holds a salted hash of its API key, never the key. Raises `ConnectionError` when the
    shared store cannot be reached."""
    store = config.store
    if not _has(store, "contents"):
        raise TypeError(f"limit store {redact.scrubbed(store.name)} cannot list what it holds")
    try:
        with anyio.fail_after(max(config.timeout, 5.0)):
            found = await store.contents()
    except Exception as exc:
        if store is config.local:
            raise
        raise ConnectionError(
            f"limit store {redact.scrubbed(store.name)} cannot be read ({type(exc).__name__})"
        ) from None
    caps = dict(config.budgets)
    if config.budget_usd is not None:
        caps[GLOBAL_BUDGET] = config.budget_usd
    return build(store.name, found, caps, _flows)


async def clear_limits(model: Any = None, *, budgets: bool | str = False) -> None:
    """Forget what the limiter has learned: every key's limits, pauses, route cooldowns
    and concurrency caps, or only those of `model` (a `Model`; every API key and base URL
    it is called with), in the configured store (so for every process sharing it) and in
    this process. Budgets are kept, unless `budgets=True` (every budget's spend and
    reservations are forgotten too) or `budgets="name"` (that budget's; "budget_usd" is
    `configure_limits(budget_usd=...)`'s). For a key a vendor froze with a bad
    `Retry-After`, after the vendor raised your limits, or to start a budget over.
    `ConnectionError` when the shared store cannot be reached."""
    if not isinstance(budgets, bool) and not (isinstance(budgets, str) and budgets):
        raise TypeError(f"budgets must be True, False or a budget's name, not {budgets!r}")
    match = None if model is None else (str(model.provider), str(model.id))
    for store in {id(config.local): config.local, id(config.store): config.store}.values():
        try:
            with anyio.fail_after(max(config.timeout, 5.0)):
                await store.clear(match)
                if budgets is not False:
                    await store.clear_budgets(None if budgets is True else budgets)
        except Exception as exc:
            if store is config.local:
                raise
            raise ConnectionError(
                f"limit store {redact.scrubbed(store.name)} cannot be cleared "
                f"({type(exc).__name__})"
            ) from None
    for key, found in list(_flows.items()):
        if model_keys(key, match):
            found.reset()  # its waiters go on: the key is open
