"""The limit stores (issue 26): in-process, a file on one host and a real `redis-server`
give the same answers to the same steps; worker processes sharing a file or Redis keep a
vendor's key under its limit together, share one budget without overspending by racing,
and carry on through a Redis killed and restarted mid-run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from limited_vendor import LimitedVendor
from redis_server import RedisServer, session_url

from stream_core import (
    Context,
    LimitStore,
    Model,
    Route,
    StreamOptions,
    UserMessage,
    complete,
    configure_limits,
)
from stream_core._limits.file_store import FileStore
from stream_core._limits.redis_store import RedisStore
from stream_core._limits.stores import LimitSettlement, MemoryStore

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["memory", "file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LimitStore:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "file":
        return FileStore(tmp_path / "limits.json")
    url = request.getfixturevalue("redis_url")
    made = RedisStore(url, prefix=_prefix(), timeout=2.0)
    made.server_time = False  # the table's times, not the server's clock
    return made


T = 1_800_000_000.0
REPORT = [["requests", 3, 2, T + 10], ["tokens", 1000, 900, T + 10]]
NEEDS = {"requests": 1, "tokens": 100, "input_tokens": 50, "output_tokens": 50}


async def test_every_store_gives_the_same_answers(store: LimitStore) -> None:
    steps: list[Any] = []
    # Open until told; a report teaches the limits.
    steps.append(await store.admit("k", NEEDS, [], T, False))
    await store.settle(
        LimitSettlement("k", used={"requests": 1}, needs=NEEDS, report=REPORT), T + 0.1
    )
    # Two fit (requests 2 left), the third waits for the reset.
    steps.append(await store.admit("k", NEEDS, [], T + 1, False))
    second = await store.admit("k", NEEDS, [], T + 1, False)
    steps.append(second)
    steps.append(await store.admit("k", NEEDS, [], T + 2, False))
    # A settlement gives back unused tokens in the same window only.
    snap = second[1]
    used = {"requests": 1, "tokens": 40}
    await store.settle(LimitSettlement("k", snap=snap, used=used, needs=NEEDS), T + 3)
    # After the reset: whole again, a new generation.
    steps.append(await store.admit("k", NEEDS, [], T + 11, False))
    # A 429's pause holds every caller; a route cooldown only routes.
    await store.settle(LimitSettlement("k", pause_until=T + 20), T + 12)
    steps.append(await store.admit("k", NEEDS, [], T + 13, False))
    await store.cool("other", T + 30)
    steps.append(await store.admit("other", NEEDS, [], T + 13, True))
    steps.append(await store.admit("other", NEEDS, [], T + 13, False))
    steps.append(await store.cooling(["other", "k", "none"]))
    # Budgets: all-or-nothing reservations, settled to the exact cost.
    steps.append(await store.admit("b", {}, [["x", 1.0, 0.6]], T, False))
    steps.append(await store.admit("b", {}, [["x", 1.0, 0.6]], T, False))
    await store.settle(LimitSettlement("b", settles=[["x", 0.6, 0.25]]), T)
    steps.append(await store.spent("x"))
    steps.append(await store.admit("b", {}, [["x", 1.0, 0.6], ["y", 0.5, 0.6]], T, False))
    steps.append(await store.spent("x"))
    await store.aclose()
    got = json.loads(json.dumps(steps))
    assert got == [
        [0.0, {}, None],
        [0.0, {"requests": 1, "tokens": 1}, None],
        [0.0, {"requests": 1, "tokens": 1}, None],
        [pytest.approx(8.1), {}, None],
        [0.0, {"requests": 2, "tokens": 2}, None],
        [pytest.approx(7.0), {}, None],
        [pytest.approx(17.0), {}, None],
        [0.0, {}, None],
        [T + 30, 0.0, 0.0],
        [0.0, {}, None],
        [0.0, {}, ["x", pytest.approx(0.4)]],
        pytest.approx(0.25),
        [0.0, {}, ["y", 0.5]],
        pytest.approx(0.25),
    ]


async def test_a_limit_reported_without_a_reset_still_refills(store: LimitStore) -> None:
    """Some servers send a limit and its remaining count but no reset (or, clocks apart,
    one already past): the window is taken to be a minute, so the count refills rather
    than running down for good and leaving every later call waiting."""
    one = {"requests": 1}
    steps: list[Any] = []
    await store.settle(
        LimitSettlement("n", used=one, needs=one, report=[["requests", 2, 1, None]]), T
    )
    steps.append(await store.admit("n", one, [], T + 1, False))
    steps.append(await store.admit("n", one, [], T + 2, False))  # used up: until T + 60
    steps.append(await store.admit("n", one, [], T + 61, False))  # whole again
    # A reset an hour past: whole at once, the next a minute on from it.
    report = [["requests", 1, 0, T - 3600]]
    await store.settle(LimitSettlement("p", used=one, needs=one, report=report), T)
    steps.append(await store.admit("p", one, [], T, False))
    steps.append(await store.admit("p", one, [], T + 1, False))
    await store.aclose()
    assert json.loads(json.dumps(steps)) == [
        [0.0, {"requests": 1}, None],
        [pytest.approx(58.1), {}, None],
        [0.0, {"requests": 2}, None],
        [0.0, {"requests": 2}, None],
        [pytest.approx(59.1), {}, None],
    ]


# --- a fleet of worker processes ---------------------------------------------------------


def _workers(
    count: int, url: str, store: str, *extra: str, calls: int = 40, concurrency: int = 8
) -> list[dict[str, Any]]:
    start_at = time.time() + 1.0  # all start together, after their imports
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "fleet_worker.py"),
                "--url",
                url,
                "--store",
                store,
                "--calls",
                str(calls),
                "--concurrency",
                str(concurrency),
                "--start-at",
                repr(start_at),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=HERE.parent,
        )  # fmt: skip
        for _ in range(count)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out))
    return results


def _kinds(results: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for r in results:
        for k, n in r["kinds"].items():
            total[k] = total.get(k, 0) + n
    return total


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["file", "redis"])
def test_four_processes_share_a_key_under_its_limit(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    v = LimitedVendor(requests=12, tokens=4000, window=0.5).start()
    try:
        if kind == "file":
            store = str(tmp_path / "limits.json")
        else:
            store = request.getfixturevalue("redis_url")
        results = _workers(4, v.url, store, "--prefix", _prefix())
        assert _kinds(results) == {"ok": 160}
        first_429 = (
            min(k for k, w in v.windows.items() if w["429"])
            if any(w["429"] for w in v.windows.values())
            else None
        )
        later = [w for k, w in v.windows.items() if first_429 is None or k > first_429]
        assert later and sum(w["429"] for w in later) == 0, v.windows
        assert v.over() == []
    finally:
        v.stop()


@pytest.mark.slow
def test_four_processes_share_one_budget(redis_url: str) -> None:
    v = LimitedVendor(requests=10_000, delay=0.02).start()
    try:
        # Worst case per call ~0.074 USD, exact ~0.043: a 2 USD budget is ~45 calls.
        results = _workers(
            4, v.url, redis_url, "--budget", "2.0", "--prefix", _prefix(),
            "--prices", "1000", "2000", "--max-tokens", "30", calls=200,
        )  # fmt: skip
        kinds = _kinds(results)
        spent = sum(r["cost"] for r in results)
        assert kinds.get("budget", 0) >= 4 and kinds["ok"] > 20, kinds
        assert spent <= 2.0
        assert 2.0 - spent < 0.08, spent  # within one call's worst case of the budget
    finally:
        v.stop()


@pytest.mark.slow
def test_a_redis_killed_and_restarted_mid_run_fails_no_call() -> None:
    server = RedisServer().start()
    v = LimitedVendor(requests=40, window=0.5, delay=0.01).start()

    def calls_go_on(more: int) -> None:
        """Wait (a guard, not a timing) until the workers have sent `more` requests."""
        target = len(v.arrivals) + more
        deadline = time.monotonic() + 30
        while len(v.arrivals) < target:
            assert time.monotonic() < deadline, "the workers stopped calling"
            time.sleep(0.05)

    try:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "fleet_worker.py"),
                    "--url",
                    v.url,
                    "--store",
                    server.url,
                    "--seconds",
                    "20",
                    "--calls",
                    "100000",
                    "--concurrency",
                    "4",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=HERE.parent,
            )  # fmt: skip
            for _ in range(2)
        ]
        calls_go_on(20)  # both running, through Redis
        server.stop()
        calls_go_on(20)  # while Redis is down: each process limits alone
        server.start()
        time.sleep(1.5)  # a failed store is tried again a second later
        calls_go_on(20)  # and rejoined
        outputs = [p.communicate(timeout=60) for p in procs]
        for p, (_, err) in zip(procs, outputs, strict=True):
            assert p.returncode == 0, err[-3000:]
        kinds = _kinds([json.loads(out) for out, _ in outputs])
        assert set(kinds) == {"ok"}, kinds
        logs = "".join(err for _, err in outputs)
        assert "limiting in this process" in logs and "answers again" in logs
    finally:
        v.stop()
        server.stop()


# --- routes: a saturated deployment is passed over; cooldowns are shared -----------------


def _two(v1: LimitedVendor, v2: LimitedVendor) -> tuple[Model, Model]:
    def model(v: LimitedVendor) -> Model:
        return Model(
            id="m-1", api="openai-completions", provider="openai", base_url=v.url, max_tokens=50
        )

    return model(v1), model(v2)


async def test_a_route_passes_over_a_saturated_deployment() -> None:
    v1 = LimitedVendor(requests=1, window=3600.0).start()
    v2 = LimitedVendor(requests=100, window=3600.0).start()
    try:
        a, b = _two(v1, v2)
        ctx = Context(messages=[UserMessage(content="hi")])
        opts = StreamOptions(api_key="k")
        await complete(a, ctx, opts)  # a's one request this window; its limit is learned
        route = Route([a, b])
        with anyio.fail_after(5):
            m = await complete(route, ctx, opts)
        assert m.error is None
        assert [(x.host, x.kind) for x in m.attempts] == [
            ("127.0.0.1", "rate_limit"),
            ("127.0.0.1", None),
        ]
        assert len(v1.arrivals) == 1  # passed over: nothing sent to the saturated one
    finally:
        v1.stop()
        v2.stop()


async def test_route_cooldowns_are_shared_through_the_store(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    v1 = LimitedVendor(requests=100, headers=False, concurrency=0).start()  # always 429
    v2 = LimitedVendor(requests=100).start()
    try:
        configure_limits(store=redis_url, prefix=_prefix())
        a, b = _two(v1, v2)
        ctx = Context(messages=[UserMessage(content="hi")])
        opts = StreamOptions(api_key="k", max_retries=0)
        first = await complete(Route([a, b]), ctx, opts)
        assert first.error is None and len(v1.arrivals) == 1
        # Another process's route (a new Route object: nothing in memory) skips `a`.
        other = await complete(Route([a, b]), ctx, opts)
        assert other.error is None
        assert len(v1.arrivals) == 1, "the cooldown in the store was not seen"
    finally:
        v1.stop()
        v2.stop()


def test_the_file_store_never_starts_a_cut_file_over(tmp_path: Path) -> None:
    """Writes are whole (a new file renamed over the old), so a cut file is not the
    store's own doing: it is refused, left as it is, never started over open."""
    path = tmp_path / "limits.json"
    cut = '{"keys": {"k": {"n": {"requests": [1, '
    path.write_text(cut)
    with pytest.raises(ValueError, match="not a stream-core limit store"):
        FileStore(path)
    assert path.read_text() == cut


def test_redis_url_password_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    store = RedisStore("redis://user:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in store.name and "***" in store.name
    logging.getLogger("stream_core").info("%s", store.name)
    assert os.environ.get("NOPE") is None
