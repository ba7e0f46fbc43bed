"""Budget holds for batches (issue 37): a batch reserves its worst case at submission, for
as long as the vendor's window, and settles to the exact cost later, perhaps from another
process after a `kill -9`. All asks or none; a second hold or settlement of one id changes
nothing; a hold never settled is given back when its time passes, and a 48-hour hold
lasts 48 hours, in the in-process store, a file and a real `redis-server`."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from redis_server import session_url

from stream_core import (
    LimitStore,
    budget_spent,
    configure_limits,
    hold_budget,
    inspect_limits,
    settle_budget,
)
from stream_core._limits import window
from stream_core._limits.file_store import FileStore
from stream_core._limits.redis_store import RedisStore
from stream_core._limits.stores import MemoryStore

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["memory", "file", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """A store, configured with a global budget of 1 USD and `eval` of 0.5 USD."""
    found: str | None = None
    if request.param == "file":
        found = str(tmp_path / "limits.json")
    elif request.param == "redis":
        found = request.getfixturevalue("redis_url")
    configure_limits(store=found, budget_usd=1.0, budgets={"eval": 0.5}, prefix=_prefix())
    return found


async def test_all_asks_or_none(where: str | None) -> None:
    assert await hold_budget([(None, 0.4, "job-1", 3600), ("eval", 0.3, "job-1", 3600)]) is None
    assert await budget_spent() == pytest.approx(0.4)
    assert await budget_spent("eval") == pytest.approx(0.3)
    # The global one fits, `eval` does not: neither is reserved.
    short = await hold_budget([(None, 0.1, "job-2", 3600), ("eval", 0.3, "job-2", 3600)])
    assert short == ["eval", pytest.approx(0.2)]
    assert await budget_spent() == pytest.approx(0.4)
    assert await hold_budget([(None, 0.7, "job-3", 3600)]) == ["budget_usd", pytest.approx(0.6)]


async def test_a_second_hold_or_settlement_of_an_id_changes_nothing(where: str | None) -> None:
    ask = [(None, 0.4, "job-1", 3600.0), ("eval", 0.3, "job-1", 3600.0)]
    assert await hold_budget(ask) is None
    assert await hold_budget(ask) is None  # a restarted process holds again: no more
    assert await budget_spent() == pytest.approx(0.4)
    done = [(None, 0.4, 0.15, "job-1"), ("eval", 0.3, 0.15, "job-1")]
    await settle_budget(done)
    assert await budget_spent() == pytest.approx(0.15)
    assert await budget_spent("eval") == pytest.approx(0.15)
    await settle_budget(done)  # settled twice (a retry): once
    await settle_budget([(None, 0.4, 0.3, "job-1")])  # another figure for it: still once
    assert await budget_spent() == pytest.approx(0.15)
    assert await hold_budget(ask) is None  # held again after its settlement: nothing
    assert await budget_spent() == pytest.approx(0.15)
    view = await inspect_limits()
    assert all(not b.reservations for b in view.budgets)


async def test_a_hold_never_settled_is_given_back_and_settles_once_later(
    where: str | None,
) -> None:
    assert await hold_budget([(None, 0.6, "job-k", 0.3)]) is None
    assert await budget_spent() == pytest.approx(0.6)
    await anyio.sleep(0.4)  # its time passes: its settler was killed
    view = await inspect_limits()  # a look: given back already in what it shows
    assert [(b.spent, b.reservations) for b in view.budgets if b.name == "budget_usd"] == [
        (0.0, [])
    ]
    assert await budget_spent() == pytest.approx(0.0)
    # The vendor billed it after all: the settlement adds the actual cost, once.
    await settle_budget([(None, 0.6, 0.2, "job-k")])
    await settle_budget([(None, 0.6, 0.2, "job-k")])
    assert await budget_spent() == pytest.approx(0.2)


async def test_an_unsettled_id_settles_once(where: str | None) -> None:
    """A settlement with no hold (its hold made where the budget was off) adds once."""
    await settle_budget([("eval", 0.1, 0.05, "never-held")])
    await settle_budget([("eval", 0.1, 0.05, "never-held")])
    assert await budget_spent("eval") == pytest.approx(0.05)


async def test_what_a_hold_and_a_settlement_take() -> None:
    configure_limits(budgets={"eval": 1.0})
    # No global budget is configured: an ask on it holds nothing (as for a call).
    assert await hold_budget([(None, 5.0, "a", 60)]) is None
    await settle_budget([(None, 5.0, 1.0, "a")])
    assert await budget_spent() == 0.0
    bad: list[object] = [
        [("nope", 0.1, "a", 60)],  # no such budget
        [("eval", -0.1, "a", 60)],
        [("eval", float("nan"), "a", 60)],
        [("eval", 0.1, "", 60)],
        [("eval", 0.1, "a" * 201, 60)],
        [("eval", 0.1, "a", 0)],
        [("eval", 0.1, "a", window.MAX_HOLD + 1)],
        [("eval", 0.1, "a")],
        "eval",
    ]
    for asks in bad:
        with pytest.raises((TypeError, ValueError)):
            await hold_budget(asks)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no budget named 'nope'"):
        await settle_budget([("nope", 0.1, 0.1, "a")])
    with pytest.raises((TypeError, ValueError)):
        await settle_budget([("eval", 0.1, float("inf"), "a")])
    assert await budget_spent("eval") == 0.0
    configure_limits(budgets={"eval": 1.0}, enabled=False)
    assert await hold_budget([("eval", 5.0, "a", 60)]) is None  # the limiter is off


async def test_a_store_that_cannot_be_reached_holds_and_settles_nothing() -> None:
    configure_limits(store="redis://u:hunter2@127.0.0.1:1/0", budget_usd=1.0, timeout=0.2)
    with pytest.raises(ConnectionError) as held:
        await hold_budget([(None, 0.1, "a", 60)])
    with pytest.raises(ConnectionError) as settled:
        await settle_budget([(None, 0.1, 0.1, "a")])
    for caught in (held, settled):
        assert "hunter2" not in str(caught.value) and "the budget is kept there" in str(
            caught.value
        )


# --- a 48-hour hold, on the store's own clock ----------------------------------------------

T = 1_800_000_000.0
H48 = 48 * 3600.0


@pytest.fixture(params=["memory", "file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LimitStore:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "file":
        return FileStore(tmp_path / "limits.json")
    made = RedisStore(request.getfixturevalue("redis_url"), prefix=_prefix(), timeout=2.0)
    made.server_time = False  # the test's times, not the server's clock
    return made


async def test_a_hold_of_48_hours_lasts_48_hours(store: LimitStore) -> None:
    def ask(rid: str) -> list[object]:
        return ["b", 1.0, 0.6, f"{rid}|0.6", H48]

    assert (await store.admit("-", {}, [ask("job-1")], T, False))[2] is None
    # Past `max_pause` (300 s), past the hour a call's reservation lasts: still held.
    for later in (window.MAX_PAUSE + 1, window.RESERVATION_TTL + 1, H48 - 60):
        short = (await store.admit("-", {}, [ask("job-2")], T + later, False))[2]
        assert short == ["b", pytest.approx(0.4)], later
    # Past its 48 hours: given back.
    assert (await store.admit("-", {}, [ask("job-2")], T + H48 + 1, False))[2] is None
    if isinstance(store, RedisStore):
        import redis

        client = redis.Redis.from_url(store.url)
        try:  # the spend and the reservations never expire in Redis by a key TTL
            assert client.ttl(f"{store.prefix}:b:b") == -1
            assert client.ttl(f"{store.prefix}:r:b") == -1
        finally:
            client.close()
    await store.aclose()


# --- hold in one process, kill it, settle in another ---------------------------------------

HOLDER = """
import asyncio, sys
from stream_core import configure_limits, hold_budget
async def main():
    configure_limits(store=sys.argv[1], prefix=sys.argv[2], budget_usd=1.0, timeout=5.0)
    print(await hold_budget([(None, 0.8, "batch-1", 2 * 86400)]), flush=True)
    await asyncio.sleep(3600)  # killed here (kill -9), the batch in flight
asyncio.run(main())
"""

SETTLER = """
import asyncio, sys
from stream_core import budget_spent, configure_limits, settle_budget
async def main():
    configure_limits(store=sys.argv[1], prefix=sys.argv[2], budget_usd=1.0, timeout=5.0)
    before = await budget_spent()
    await settle_budget([(None, 0.8, 0.35, "batch-1")])
    await settle_budget([(None, 0.8, 0.35, "batch-1")])
    print(before, await budget_spent(), flush=True)
asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["file", "redis"])
async def test_a_hold_outlives_a_killed_process_and_settles_in_another(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = (
        str(tmp_path / "limits.json") if kind == "file" else request.getfixturevalue("redis_url")
    )
    prefix = _prefix()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, where, prefix], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "None"  # held
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        if holder.stdout is not None:
            holder.stdout.close()
    configure_limits(store=where, prefix=prefix, budget_usd=1.0)
    view = await inspect_limits()
    (budget,) = view.budgets
    assert [(r.id, r.amount) for r in budget.reservations] == [("batch-1", 0.8)]
    assert budget.reservations[0].expires_at == pytest.approx(view.now + 2 * 86400, abs=60)
    done = subprocess.run(
        [sys.executable, "-c", SETTLER, where, prefix], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = map(float, done.stdout.split())
    assert before == pytest.approx(0.8) and after == pytest.approx(0.35)
    assert await budget_spent() == pytest.approx(0.35)
    assert not (await inspect_limits()).budgets[0].reservations
