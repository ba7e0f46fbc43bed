"""Routes (issue 34): a vendor's `retry_after` cools a deployment for `max_cooldown` at most,
a deployment passed over is recorded unsent, the failures-in-a-row streak is kept with the
cooldown in a shared store (a success anywhere resets it, the failures of one burst count
once), and a route that serves most calls from a fallback says so (a log line, `stats()`).

Two `Route` objects sharing a store play two processes; the stores are the in-process
one, a file and a real `redis-server`."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from limited_vendor import LimitedVendor
from redis_server import session_url

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
from stream_core._limits.stores import MemoryStore
from stream_core.testing import faux_error, faux_model

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hi")])
OPTS = StreamOptions(api_key="k", max_retries=0)
GUARD = 10.0  # seconds: a guard against hangs, not a timing assertion


class Clock:
    """A clock the test moves: cooldown deadlines without real waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedVendor(LimitedVendor):
    """A loopback OpenAI-compatible vendor answering each request by a script of statuses
    (200: an answer; else that error status); past the script, 200. With `gate`, the first
    `gate` requests are held until that many have arrived (one burst)."""

    def __init__(
        self, script: list[int], *, gate: int = 0, retry_after_header: str | None = None
    ) -> None:
        super().__init__(headers=False)
        self.script = list(script)
        self.gate = gate
        self.retry_after_header = retry_after_header
        self._arrived = 0
        self._open: asyncio.Event | None = None

    async def _answer(self, payload: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        status = self.script.pop(0) if self.script else 200
        if self.gate:
            if self._open is None:
                self._open = asyncio.Event()
            self._arrived += 1
            if self._arrived >= self.gate:
                self._open.set()
            await asyncio.wait_for(self._open.wait(), GUARD)
        if status == 200:
            await super()._answer(payload, writer)
            return
        self.arrivals.append(time.time())
        self.statuses.append(status)
        body = b'{"error":{"type":"overloaded_error","message":"Overloaded"}}'
        extra = b""
        if self.retry_after_header is not None:
            extra = f"retry-after: {self.retry_after_header}\r\n".encode()
        writer.write(
            b"HTTP/1.1 %d Error\r\ncontent-type: application/json\r\n" % status
            + extra
            + b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()


def _model(v: LimitedVendor) -> Model:
    return Model(
        id="m-1", api="openai-completions", provider="openai", base_url=v.url, max_tokens=50
    )


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


@pytest.fixture(params=["memory", "file", "redis"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store every route of the test shares (a `MemoryStore` of its own stands for a
    shared one: it is not the process's default)."""
    if request.param == "memory":
        configure_limits(store=MemoryStore())
    elif request.param == "file":
        configure_limits(store=FileStore(tmp_path / "limits.json"))
    else:
        url = request.getfixturevalue("redis_url")
        configure_limits(store=RedisStore(url, prefix=f"t{uuid.uuid4().hex[:12]}", timeout=2.0))
    yield str(request.param)
    configure_limits()


# --- point 1: a cooldown from a vendor's retry_after is bounded by max_cooldown -----------


async def test_a_retry_after_of_1e9_cools_for_max_cooldown_at_most() -> None:
    clock = Clock()
    first = faux_model([faux_error("rate_limit", status=429, retry_after=1e9)])
    second = faux_model(["ok"])
    route = Route([first, second], clock=clock)
    message = await complete(route, CONTEXT, StreamOptions(max_retries=0))
    assert message.text() == "ok"
    assert message.attempts is not None and message.attempts[0].retry_after == 1e9
    assert route.ready_in(route.deployments[0]) == 300.0
    # The caller may raise the bound.
    raised = Route([faux_model([])], clock=clock, max_cooldown=3600)
    raised.cool(raised.deployments[0], "overloaded", 999_999.9)
    assert raised.ready_in(raised.deployments[0]) == 3600.0
    # A key or model that is wrong stays out for long_cooldown, as before.
    raised.cool(raised.deployments[0], "auth", 1e9)
    assert raised.ready_in(raised.deployments[0]) == 3600.0


@pytest.mark.slow
async def test_a_shared_cooldown_from_retry_after_1e9_is_bounded_too(shared_store: str) -> None:
    v1 = ScriptedVendor([529], retry_after_header="1000000000").start()
    v2 = ScriptedVendor([]).start()
    try:
        a, b = _model(v1), _model(v2)
        one, two = Route([a, b]), Route([a, b])  # two processes
        with anyio.fail_after(GUARD):
            first = await complete(one, CONTEXT, OPTS)
            other = await complete(two, CONTEXT, OPTS)
        assert first.error is None and other.error is None
        assert first.attempts is not None and other.attempts is not None
        assert first.attempts[0].status_code == 529
        assert 0 < one.ready_in(one.deployments[0]) <= 300
        # The other process passes it over for what the store says: 300 s at most.
        passed = other.attempts[0]
        assert passed.kind == "rate_limit" and not passed.sent
        assert passed.retry_after is not None and 0 < passed.retry_after <= 300
        assert 0 < two.ready_in(two.deployments[0]) <= 300
        assert len(v1.arrivals) == 1
    finally:
        v1.stop()
        v2.stop()


# --- point 2: a deployment passed over is recorded as not sent -----------------------------


async def test_a_passed_over_deployment_is_recorded_not_sent() -> None:
    v1 = LimitedVendor(requests=1, window=3600.0).start()
    v2 = LimitedVendor(requests=100, window=3600.0).start()
    try:
        a, b = _model(v1), _model(v2)
        await complete(a, CONTEXT, StreamOptions(api_key="k"))  # its one request this window
        route = Route([a, b])
        with anyio.fail_after(GUARD):
            message = await complete(route, CONTEXT, StreamOptions(api_key="k"))
        assert message.error is None and message.attempts is not None
        passed, served = message.attempts
        assert (passed.kind, passed.sent, passed.status_code, passed.ms) == (
            "rate_limit",
            False,
            None,
            0.0,
        )
        assert passed.retry_after is not None and passed.retry_after > 0
        assert (served.kind, served.sent) == (None, True)
        assert len(v1.arrivals) == 1
        # Passing over is not a failure: no strike, counted as passed over.
        first = route.deployments[0]
        assert first.strikes == 0
        assert (first.passed_over, first.failed, first.served) == (1, 0, 0)
    finally:
        v1.stop()
        v2.stop()


async def test_a_call_ending_on_a_passed_over_deployment_says_not_sent() -> None:
    """When every deployment is at its limit past the call's wait, the summary says which
    were never sent."""
    v1 = LimitedVendor(requests=1, window=3600.0).start()
    v2 = LimitedVendor(requests=1, window=3600.0).start()
    try:
        a, b = _model(v1), _model(v2)
        opts = StreamOptions(api_key="k", max_retry_delay=1)
        await complete(a, CONTEXT, opts)
        await complete(b, CONTEXT, opts)
        with anyio.fail_after(GUARD):
            message = await complete(Route([a, b]), CONTEXT, opts)
        assert message.error is not None and message.error.kind == "rate_limit"
        assert message.attempts is not None and not message.attempts[0].sent
        assert "(not sent)" in message.error.message
    finally:
        v1.stop()
        v2.stop()


# --- point 3: the streak is shared, a success resets it, a burst counts once --------------


@pytest.mark.slow
async def test_a_success_in_another_process_resets_the_shared_streak(
    shared_store: str,
) -> None:
    # 529, then four answers, then 529: the second 529 is a first failure in a row again.
    v1 = ScriptedVendor([529, 200, 200, 200, 200, 529]).start()
    v2 = ScriptedVendor([]).start()
    cooldown = 0.6
    try:
        a, b = _model(v1), _model(v2)
        one = Route([a, b], cooldown=cooldown)
        two = Route([a, b], cooldown=cooldown)
        with anyio.fail_after(4 * GUARD):
            m = await complete(one, CONTEXT, OPTS)
            assert m.attempts is not None and m.attempts[0].status_code == 529
            assert one.deployments[0].strikes == 1
            m = await complete(two, CONTEXT, OPTS)  # passed over: the store says it cools
            assert m.attempts is not None and not m.attempts[0].sent
            await anyio.sleep(cooldown + 0.2)
            for _ in range(4):
                m = await complete(two, CONTEXT, OPTS)
                assert m.model == "m-1" and m.attempts is not None
                assert len(m.attempts) == 1 and m.attempts[0].host == "127.0.0.1"
            assert len(v1.arrivals) == 5
            m = await complete(one, CONTEXT, OPTS)
        assert m.attempts is not None and m.attempts[0].status_code == 529
        assert len(v1.arrivals) == 6
        # One failure in a row, not two: cooled for `cooldown`, not twice it.
        assert one.deployments[0].strikes == 1
        assert one.ready_in(one.deployments[0]) <= cooldown
    finally:
        v1.stop()
        v2.stop()


@pytest.mark.slow
async def test_the_failures_of_one_burst_count_once(shared_store: str) -> None:
    v1 = ScriptedVendor([529, 529, 529], gate=3).start()
    v2 = ScriptedVendor([]).start()
    cooldown = 2.0
    try:
        a, b = _model(v1), _model(v2)
        one = Route([a, b], cooldown=cooldown)
        two = Route([a, b], cooldown=cooldown)
        results: list[Any] = []

        async def call(route: Route) -> None:
            results.append(await complete(route, CONTEXT, OPTS))

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, one)
                tg.start_soon(call, one)
                tg.start_soon(call, two)
        assert len(v1.arrivals) == 3
        assert all(m.error is None and m.attempts[0].status_code == 529 for m in results)
        # One strike between them, wherever it was seen: a cooldown of `cooldown`.
        assert one.deployments[0].strikes == 1
        assert two.deployments[0].strikes == 1
        assert one.ready_in(one.deployments[0]) <= cooldown
        assert two.ready_in(two.deployments[0]) <= cooldown
        assert one.deployments[0].failed == 2 and two.deployments[0].failed == 1
    finally:
        v1.stop()
        v2.stop()


@pytest.fixture(params=["memory", "file", "redis"])
def bare_store(request: pytest.FixtureRequest, tmp_path: Path) -> LimitStore:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "file":
        return FileStore(tmp_path / "limits.json")
    store = RedisStore(request.getfixturevalue("redis_url"), prefix=f"t{uuid.uuid4().hex[:12]}")
    store.timeout = 2.0
    store.server_time = False  # the table's times, not the server's clock
    return store


async def test_every_store_keeps_the_streak_with_the_cooldown(bare_store: LimitStore) -> None:
    store, t, backoff = bare_store, 1_800_000_000.0, (5.0, 300.0)
    steps: list[Any] = []
    steps.append(await store.cool("k", 0.0, t, started=t - 1, backoff=backoff))
    # Sent before that failure was counted: the same burst, no second strike.
    steps.append(await store.cool("k", 0.0, t + 0.5, started=t - 0.5, backoff=backoff))
    # Sent after it: a failure in a row, cooled from it for twice as long.
    steps.append(await store.cool("k", 0.0, t + 6, started=t + 5.5, backoff=backoff))
    # A success sent before the last two failures forgets nothing (one sent between them:
    # tests/test_review_routes_34.py); one sent after, everything.
    steps.append(await store.cool("k", 0.0, t + 7, started=t - 0.5, reset=True))
    steps.append(await store.cool("k", 0.0, t + 20, started=t + 17, reset=True))
    steps.append(await store.cool("k", 0.0, t + 30, started=t + 29, backoff=backoff))
    # A fixed wait (a vendor's retry_after, bounded by the route) with the streak.
    steps.append(await store.cool("k", t + 100, t + 40, started=t + 39))
    steps.append(await store.cooling(["k", "none"]))
    # Nothing to forget: nothing made.
    steps.append(await store.cool("new", 0.0, t, started=t, reset=True))
    steps.append(await store.cooling(["new"]))
    await store.aclose()
    assert steps == [
        (pytest.approx(t + 5, abs=0.01), 1),
        (pytest.approx(t + 5, abs=0.01), 1),
        (pytest.approx(t + 16, abs=0.01), 2),
        (pytest.approx(t + 16, abs=0.01), 2),
        (0.0, 0),  # past its deadline
        (pytest.approx(t + 35, abs=0.01), 1),
        (pytest.approx(t + 100, abs=0.01), 2),
        [pytest.approx(t + 100, abs=0.01), 0.0],
        (0.0, 0),
        [0.0],
    ]


async def test_in_one_process_a_burst_counts_once_and_a_late_success_forgets_nothing() -> None:
    clock = Clock()
    route = Route([faux_model([]), faux_model([])], clock=clock, cooldown=5)
    d = route.deployments[0]
    sent = clock.now
    clock.now += 1
    for _ in range(3):  # three calls sent together, failing together
        route.cool(d, "overloaded", None, started=sent)
    assert d.strikes == 1 and route.ready_in(d) == 5
    # A call sent before that cooldown began, succeeding after it: not a success after it.
    route.served(d, None, None, started=sent)
    assert d.strikes == 1
    clock.now += 6
    route.cool(d, "overloaded", None, started=clock.now)  # a failure in a row
    assert d.strikes == 2 and route.ready_in(d) == 10
    clock.now += 11
    route.served(d, None, None, started=clock.now)
    assert d.strikes == 0


# --- point 3: a route serving mostly from a fallback says so -------------------------------


async def test_a_route_serving_mostly_from_a_fallback_says_so_once_a_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    primary = faux_model([faux_error("auth", status=401)])
    fallback = faux_model(["ok"] * 40)
    route = Route([primary, fallback], clock=clock)
    caplog.set_level(logging.WARNING, logger="stream_core")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "fallback" in r.getMessage()]

    for _ in range(20):
        assert (await complete(route, CONTEXT, StreamOptions(max_retries=0))).text() == "ok"
        clock.now += 1
    assert warnings() == []  # not per call
    clock.now += 60
    for _ in range(20):
        assert (await complete(route, CONTEXT, StreamOptions(max_retries=0))).text() == "ok"
    (line,) = warnings()  # once for the window, not for each call after it
    assert "21 of 21 calls" in line and "deployment 1" in line
    p, f = route.deployments
    assert (p.served, p.failed, p.passed_over) == (0, 1, 39)
    assert (f.served, f.failed, f.passed_over) == (40, 0, 0)
    stats = route.stats()
    assert stats["calls"] == 40 and stats["fallback"] == 40
    assert stats["deployments"][0]["passed_over"] == 39
    assert stats["deployments"][0]["label"] == p.label
    assert stats["deployments"][0]["cooling"] > 0


async def test_a_route_served_by_its_first_choice_stays_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    route = Route([faux_model(["ok"] * 30), faux_model([])], clock=clock)
    caplog.set_level(logging.WARNING, logger="stream_core")
    for _ in range(30):
        await complete(route, CONTEXT)
        clock.now += 5
    assert not [r for r in caplog.records if "fallback" in r.getMessage()]
    assert route.stats()["fallback"] == 0 and route.deployments[0].served == 30


@pytest.mark.slow
async def test_another_process_passing_over_a_cooled_primary_counts_it(
    shared_store: str,
) -> None:
    v1 = ScriptedVendor([529]).start()
    v2 = ScriptedVendor([]).start()
    try:
        a, b = _model(v1), _model(v2)
        one, two = Route([a, b], cooldown=30), Route([a, b], cooldown=30)
        with anyio.fail_after(GUARD):
            await complete(one, CONTEXT, OPTS)
            for _ in range(3):
                await complete(two, CONTEXT, OPTS)
        p = two.deployments[0]
        # Once through the store (an unsent attempt), then skipped while it cools here too.
        assert (p.served, p.failed, p.passed_over) == (0, 0, 3)
        assert two.stats()["fallback"] == 3
        assert len(v1.arrivals) == 1
    finally:
        v1.stop()
        v2.stop()
