"""The limiter's bounds (issue 34, H1): what one vendor answer, one store value or one
worker's clock can do to a key is bounded. A pause or reset learned from a vendor is at
most `max_pause` (and a 429's at most the `max_retry_delay` of the call that met it); a
normal answer lifts a pause; `clear_limits` forgets a key; values read back from any store
are range-checked; shared pauses do not depend on one worker's clock; a key capped after
a 429 wakes its waiters when a slot is given back, bounds their wait and recovers; token
admission learns how far the context estimate is from the vendor's count; a huge reply
from the Redis port neither stalls the call nor its loop; unsettled reservations expire."""

from __future__ import annotations

import asyncio
import json
import math
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
    Model,
    ModelPrices,
    StreamOptions,
    UserMessage,
    complete,
    configure_limits,
)
from stream_core._limits.file_store import FileStore
from stream_core._limits.redis_store import RedisStore
from stream_core._limits.stores import LimitSettlement, LimitStore, MemoryStore

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hello there")])
HOUR = 3600.0


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


@pytest.fixture(params=["memory", "file", "redis"])
def store_kind(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """What `configure_limits(store=...)` is given: each store the limiter has."""
    if request.param == "memory":
        return None
    if request.param == "file":
        return str(tmp_path / "limits.json")
    url: str = request.getfixturevalue("redis_url")
    return url


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


# --- a vendor that answers from a script ------------------------------------------------


class ScriptedVendor:
    """OpenAI Chat Completions on loopback; request i gets `script[i]` (the last one
    again past the end): ("ok", headers, delay before the head) or (status, headers)."""

    def __init__(self, script: list[tuple[Any, ...]]) -> None:
        self.script = script
        self.arrivals = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                step = self.script[min(self.arrivals, len(self.script) - 1)]
                self.arrivals += 1
                what, headers = step[0], dict(step[1])
                if what == "ok":
                    if len(step) > 2:
                        await asyncio.sleep(step[2])
                    stop = {"index": 0, "delta": {}, "finish_reason": "stop"}
                    chunks = [
                        {"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
                        {"id": "c", "choices": [stop]},
                        {"id": "c", "choices": [], "usage": {"prompt_tokens": 5}},
                    ]
                    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
                    body += b"data: [DONE]\n\n"
                    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        + extra.encode()
                        + b"content-length: %d\r\n\r\n%s" % (len(body), body)
                    )
                else:
                    body = b'{"error":{"type":"rate_limit_error","message":"slow down"}}'
                    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                    writer.write(
                        b"HTTP/1.1 %d Too Many Requests\r\ncontent-type: application/json\r\n"
                        % what
                        + extra.encode()
                        + b"content-length: %d\r\n\r\n%s" % (len(body), body)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def start(self) -> ScriptedVendor:
        import threading

        ready = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            async with self._server:
                try:
                    await self._server.serve_forever()
                except asyncio.CancelledError:
                    pass

        threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)

    def model(self) -> Model:
        return Model(
            id="m-1",
            api="openai-completions",
            provider="openai",
            base_url=f"http://127.0.0.1:{self.port}/v1",
            max_tokens=20,
        )


@pytest.fixture
def vendors() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for v in made:
        v.stop()


def _scripted(made: list[Any], script: list[tuple[Any, ...]]) -> ScriptedVendor:
    v = ScriptedVendor(script).start()
    made.append(v)
    return v


def _configure(store: str | None, **kwargs: Any) -> None:
    configure_limits(store=store, prefix=_prefix(), **kwargs)


OK: tuple[Any, ...] = ("ok", {})


async def _ready_in(model: Model) -> float:
    """How long the key's next call would wait: a call that will not wait says so."""
    m = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retry_delay=0))
    if m.error is None:
        return 0.0
    assert m.error.kind == "rate_limit", m.error
    assert m.error.retry_after is not None
    return m.error.retry_after


# --- 1: one answer cannot freeze a key ----------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "1000000000"},
        {"retry-after": "Wed, 01 Jan 2999 00:00:00 GMT"},
        {"retry-after": "30000"},  # milliseconds sent as seconds: 8.3 hours
    ],
)
async def test_one_429_pauses_a_key_at_most_the_bound(
    vendors: list[Any], store_kind: str | None, headers: dict[str, str]
) -> None:
    _configure(store_kind)
    model = _scripted(vendors, [(429, headers), OK]).model()
    first = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
    assert first.error is not None and first.error.kind == "rate_limit"
    # Was 999,999,999 s (and 8.3 h for the milliseconds): the key refused every call.
    # Now at most `max_retry_delay` of the call that met it (60 s by default).
    assert 0 < await _ready_in(model) <= 60.0


async def test_max_pause_bounds_the_pause_and_a_reset(
    vendors: list[Any], store_kind: str | None
) -> None:
    _configure(store_kind, max_pause=0.5)
    far = {"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "0",
           "x-ratelimit-reset-requests": "8700h"}  # fmt: skip
    v = _scripted(vendors, [("ok", far), (429, {"retry-after": "1000000000"}), OK])
    model = v.model()
    assert (await complete(model, CONTEXT, StreamOptions(api_key="k"))).error is None
    # The 200 said the window resets in 362 days: a window of `max_pause` at most.
    assert 0 < await _ready_in(model) <= 0.5 + 0.2
    with anyio.fail_after(10):
        m = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
        assert m.error is not None and m.error.kind == "rate_limit"  # the 429
        # The 429 asked for 31 years, with max_retry_delay=60: 0.5 s it is.
        assert 0 < await _ready_in(model) <= 0.5 + 0.2
        later = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    assert later.error is None, later.error


def test_max_pause_is_validated() -> None:
    with pytest.raises(ValueError, match="max_pause must be more than 0"):
        configure_limits(max_pause=0)
    with pytest.raises(TypeError, match="max_pause must be a number"):
        configure_limits(max_pause="300")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_pause must be a finite number"):
        configure_limits(max_pause=math.inf)


async def test_a_normal_answer_lifts_the_pause(vendors: list[Any], store_kind: str | None) -> None:
    """A call sent before the 429 whose 200 arrives after it: the vendor serves again."""
    _configure(store_kind)
    v = _scripted(vendors, [("ok", {}, 0.6), (429, {"retry-after": "3600"}), OK])
    model = v.model()
    slow: list[Any] = []

    async def first() -> None:
        slow.append(await complete(model, CONTEXT, StreamOptions(api_key="k")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.sleep(0.2)  # the first is sent, its answer 0.6 s away
        limited = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
        assert limited.error is not None and limited.error.kind == "rate_limit"
    assert slow[0].error is None
    # Was: every call refused for the 429's pause (3,600 s, 60 s here). Now: served.
    assert await _ready_in(model) == 0.0


async def test_a_2xx_answered_before_the_429_does_not_lift_it(
    vendors: list[Any], store_kind: str | None
) -> None:
    _configure(store_kind)
    v = _scripted(vendors, [OK, (429, {"retry-after": "3600"}), OK])
    model = v.model()
    s = __import__("stream_core").stream(model, CONTEXT, StreamOptions(api_key="k"))
    async with s:
        async for event in s:
            if event.type == "start":
                break
        # Its 200 has arrived; now another call meets a 429; then the first ends.
        limited = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
        assert limited.error is not None and limited.error.kind == "rate_limit"
        await s.result()
    assert await _ready_in(model) > 30


async def test_clear_limits_forgets_a_key(vendors: list[Any], store_kind: str | None) -> None:
    _configure(store_kind)
    v = _scripted(vendors, [(429, {"retry-after": "3600"}), OK])
    model = v.model()
    other = Model(**{**model.model_dump(), "id": "m-2"})
    m = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
    assert m.error is not None
    v.arrivals = 0  # the other model meets the 429 too
    m = await complete(other, CONTEXT, StreamOptions(api_key="k", max_retries=0))
    assert m.error is not None
    assert await _ready_in(model) > 30 and await _ready_in(other) > 30
    from stream_core import clear_limits

    await clear_limits(model)
    assert await _ready_in(model) == 0.0
    assert await _ready_in(other) > 30  # another model's key is untouched
    await clear_limits()
    assert await _ready_in(other) == 0.0


# --- 3: whatever a store hands back is range-checked --------------------------------------


def _plain_store(kind: str, tmp_path: Path, redis_url: str | None) -> LimitStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "file":
        return FileStore(tmp_path / "limits.json")
    assert redis_url is not None
    return RedisStore(redis_url, prefix=_prefix(), timeout=2.0)


async def _plant(store: LimitStore, key: str, entry: Any, budgets: dict[str, Any]) -> None:
    """Write `entry` and `budgets` into the store as a hostile or broken writer would."""
    if isinstance(store, MemoryStore):
        store.tables.keys[key] = entry
        store.tables.spent.update(budgets)
    elif isinstance(store, FileStore):
        Path(store.path).write_text(json.dumps({"keys": {key: entry}, "budgets": budgets}))
    else:
        import redis

        assert isinstance(store, RedisStore)
        client = redis.Redis.from_url(store.url)
        client.set(f"{store.prefix}:k:{key}", json.dumps(entry))
        for name, value in budgets.items():
            client.set(f"{store.prefix}:b:{name}", str(value))
        client.close()


@pytest.mark.parametrize("kind", ["memory", "file", "redis"])
async def test_values_read_from_a_store_are_range_checked(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("redis_url") if kind == "redis" else None
    store = _plain_store(kind, tmp_path, url)
    if isinstance(store, RedisStore):
        store.server_time = False  # this test's times (`now + 301`), not the server's
    now = time.time()
    entry = {
        "p": now + 1e12,  # a pause for 31,000 years
        "c": "soon",  # not a number
        "n": {
            "requests": [10, 0, now + 1e9, 1, 1e12],  # used up, resets in 31 years
            "tokens": [1000, "x", None, 1, 0],  # not numbers: dropped
        },
    }
    await _plant(store, "k", entry, {"neg": -100.0, "nan": "nan"})
    need = {"requests": 1, "tokens": 10}
    wait, _, _ = await store.admit("k", need, [], now, False)
    assert 0 < wait <= 300.0 + 1  # was 1e12 s
    # Past the pause: the window's reset was clamped too (was 1e9 s).
    wait, _, _ = await store.admit("k", need, [], now + 301, False)
    assert wait <= 1.0
    # A negative spend is not credit; a spend that is not a number is not "nothing left".
    ask = [["neg", 1.0, 0.6]]
    assert (await store.admit("b", {}, ask, now, False))[2] is None
    assert (await store.admit("b", {}, ask, now, False))[2] is not None  # was admitted
    assert (await store.admit("b", {}, [["nan", 1.0, 0.6]], now, False))[2] is None
    assert 0 <= await store.spent("neg") <= 1.0
    await store.aclose()


async def test_a_file_store_holding_garbage_starts_open(tmp_path: Path) -> None:
    path = tmp_path / "limits.json"
    path.write_text(json.dumps({"keys": 5, "budgets": [1], "held": "x"}))
    store = FileStore(path)
    assert await store.admit("k", {"requests": 1}, [["b", 1.0, 0.5]], time.time(), False) == (
        0.0,
        {},
        None,
    )


# --- 7: a worker's wrong clock moves no one else's pauses ---------------------------------


@pytest.mark.parametrize("skew", [HOUR, -HOUR])
async def test_a_worker_with_a_wrong_clock_moves_no_pause(redis_url: str, skew: float) -> None:
    prefix = _prefix()
    wrong = RedisStore(redis_url, prefix=prefix, timeout=2.0)
    right = RedisStore(redis_url, prefix=prefix, timeout=2.0)
    one = {"requests": 1}
    # The wrong clock meets a 429 with Retry-After: 5.
    fast_now = time.time() + skew
    await wrong.settle(LimitSettlement("k", pause_until=fast_now + 5), fast_now)
    wait, _, _ = await right.admit("k", one, [], time.time(), False)
    assert 3 < wait <= 5.5  # was 3,605 s an hour fast, and no pause at all an hour slow
    # And a window it reports: used up, resetting in 10 s.
    fast_now = time.time() + skew
    report = [["requests", 5, 0, fast_now + 10]]
    await wrong.settle(LimitSettlement("w", used=one, needs=one, report=report), fast_now)
    wait, _, _ = await right.admit("w", one, [], time.time(), False)
    assert 8 < wait <= 10.5
    await wrong.aclose()
    await right.aclose()


# --- 9: a key capped after a 429 -----------------------------------------------------------


def _no_headers(made: list[Any], **kwargs: Any) -> LimitedVendor:
    v = LimitedVendor(headers=False, retry_after=False, **kwargs).start()
    made.append(v)
    return v


def _limited_model(v: LimitedVendor) -> Model:
    return Model(
        id="m-1", api="openai-completions", provider="openai", base_url=v.url, max_tokens=20
    )


async def _cap_at_one(v: LimitedVendor, model: Model) -> None:
    """One call meets a 429 with no headers: the key is capped at one call in flight."""
    serves, v.concurrency = v.concurrency, 0
    m = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
    assert m.error is not None and m.error.status_code == 429
    v.concurrency = serves


@pytest.mark.slow
async def test_waiting_for_a_slot_is_bounded_and_does_not_poll(
    vendors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    polls = [0]
    real_sleep = anyio.sleep

    async def sleep(delay: float) -> None:
        if 0 < delay <= 0.1:
            polls[0] += 1  # a short look again: what polling is
        await real_sleep(delay)

    monkeypatch.setattr(anyio, "sleep", sleep)
    v = _no_headers(vendors, concurrency=1, delay=3.0)
    model = _limited_model(v)
    await _cap_at_one(v, model)
    held: list[Any] = []
    waited: list[Any] = []

    async def hold() -> None:
        held.append(await complete(model, CONTEXT, StreamOptions(api_key="k")))

    async def wait_for_slot() -> None:
        opts = StreamOptions(api_key="k", max_retry_delay=1.0)
        waited.append(await complete(model, CONTEXT, opts))

    with anyio.fail_after(20):  # a guard: the waits used to be unbounded
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await anyio.sleep(0.3)  # the held stream has the one slot
            polls[0] = 0
            for _ in range(200):
                tg.start_soon(wait_for_slot)
            await real_sleep(0.7)
            looked = polls[0]
    # 200 waiters polling every 50 ms look ~2,800 times in 0.7 s; asleep until a slot is
    # given back (or their max_retry_delay passes), they look not at all.
    assert looked < 50, looked
    assert held[0].error is None
    assert len(waited) == 200
    # Each ended once `max_retry_delay` passed, nothing sent (was: waited with no bound).
    for m in waited:
        assert m.error is not None and m.error.kind == "rate_limit", m.error
        assert "concurrency slots" in m.error.message and "nothing was sent" in m.error.message


@pytest.mark.slow
async def test_the_cap_recovers_while_a_stream_holds_the_slot(vendors: list[Any]) -> None:
    v = _no_headers(vendors, concurrency=5, delay=15.0)  # every stream held open 15 s
    model = _limited_model(v)
    await _cap_at_one(v, model)
    done: list[Any] = []

    async def call() -> None:
        done.append(await complete(model, CONTEXT, StreamOptions(api_key="k")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.sleep(0.2)
        tg.start_soon(call)
        # Was: the second waits for the first's slot (15 s). Now the cap doubles after 5 s.
        with anyio.fail_after(12):
            while v.max_in_flight < 2:
                await anyio.sleep(0.1)
        tg.cancel_scope.cancel()


async def test_a_vendor_without_headers_still_gets_adaptive_concurrency(
    vendors: list[Any],
) -> None:
    v = _no_headers(vendors, concurrency=3, delay=0.05)
    found = [None] * 40

    async def one(i: int) -> None:
        opts = StreamOptions(api_key="k", retry_backoff=0.01, max_retries=8)
        found[i] = await complete(_limited_model(v), CONTEXT, opts)  # type: ignore[call-overload]

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(one, i)
    assert all(m is not None and m.error is None for m in found)
    assert v.max_in_flight <= 3


# --- token admission learns the vendor's count --------------------------------------------


class OverheadVendor(LimitedVendor):
    """Counts each prompt as the vendor does with its system and tool JSON: more than
    `estimate_context_tokens` says."""

    def _prompt_tokens(self, payload: dict[str, Any]) -> int:
        return int(super()._prompt_tokens(payload) * 1.1) + 53


async def test_token_admission_learns_the_vendors_count(vendors: list[Any]) -> None:
    v = OverheadVendor(requests=10_000, tokens=2_000, window=0.5).start()
    vendors.append(v)
    model = Model(
        id="m-1", api="openai-completions", provider="openai", base_url=v.url, max_tokens=20
    )
    context = Context(messages=[UserMessage(content="a question of some length " * 8)])

    async def many(count: int) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                opts = StreamOptions(api_key="k", max_tokens=20)  # sent: the vendor counts it
                tg.start_soon(complete, model, context, opts)

    await many(3)  # learns the limits
    await many(3)  # and the vendor's count
    first_window = max(v.windows)
    await many(80)
    later = [w for k, w in v.windows.items() if k > first_window]
    # Was: at each rollover a burst admitted by the estimate; several answered 429.
    assert later and sum(w["429"] for w in later) == 0, v.windows
    assert v.over() == []


# --- low: a huge reply on the Redis port; reservations expire -----------------------------


async def _resp_command(reader: asyncio.StreamReader) -> list[bytes]:
    """One RESP command (an array of bulk strings)."""
    line = await reader.readuntil(b"\r\n")
    if not line.startswith(b"*"):
        raise ValueError(line)
    parts = []
    for _ in range(int(line[1:])):
        size = int((await reader.readuntil(b"\r\n"))[1:])
        parts.append((await reader.readexactly(size + 2))[:-2])
    return parts


class HugeRedis:
    """Answers every command with a 100 MB bulk string."""

    def __init__(self) -> None:
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A valid JSON array of 50 million numbers: parsing it is what took seconds.
        body = b"[" + b"0," * (50 * 1024 * 1024 - 1) + b"0]"
        try:
            while True:
                command = await _resp_command(reader)
                name = command[0].upper() if command else b""
                if name in (b"EVALSHA", b"EVAL"):
                    writer.write(b"$%d\r\n" % len(body) + body + b"\r\n")
                elif name == b"HELLO":  # RESP3, as redis-py asks
                    writer.write(
                        b"%3\r\n+server\r\n+redis\r\n+version\r\n+7.0.0\r\n+proto\r\n:3\r\n"
                    )
                elif name == b"SCRIPT":
                    writer.write(b"$40\r\n" + b"0" * 40 + b"\r\n")
                else:  # CLIENT SETINFO, SELECT, PING...
                    writer.write(b"+OK\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    def start(self) -> HugeRedis:
        import threading

        ready = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            async with self._server:
                try:
                    await self._server.serve_forever()
                except asyncio.CancelledError:
                    pass

        threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)


@pytest.mark.slow
async def test_a_huge_redis_reply_stalls_neither_the_call_nor_its_loop(
    vendors: list[Any],
) -> None:
    big = HugeRedis().start()
    vendors.append(big)
    v = LimitedVendor(requests=1000).start()
    vendors.append(v)
    configure_limits(store=f"redis://127.0.0.1:{big.port}/0", timeout=0.25)
    gaps: list[float] = []
    stop = anyio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await anyio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        started = time.monotonic()
        m = await complete(_limited_model(v), CONTEXT, StreamOptions(api_key="k"))
        took = time.monotonic() - started
        stop.set()
    from stream_core._limits import limiter

    await limiter.config.store.aclose()  # the connection the timeout cut, closed here
    await anyio.sleep(0.1)
    assert m.error is None, m.error
    # Was: the call and its loop stalled about 3 s past the 0.25 s store timeout.
    assert took < 2.0, took
    assert max(gaps) < 1.0, max(gaps)


@pytest.mark.parametrize("kind", ["memory", "file", "redis"])
async def test_an_unsettled_reservation_is_given_back(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("redis_url") if kind == "redis" else None
    store = _plain_store(kind, tmp_path, url)
    now = time.time()
    # A worker reserves 0.6 of a 1.0 budget, held 0.5 s, and is killed: never settled.
    first = await store.admit("b", {}, [["x", 1.0, 0.6, "dead|0.6", 0.5]], now, False)
    assert first[2] is None
    assert (await store.admit("b", {}, [["x", 1.0, 0.6, "b|0.6", 0.5]], now, False))[2]
    await anyio.sleep(0.8)
    now = time.time()
    # Was: refused for good. Now the dead worker's reservation is back.
    assert (await store.admit("b", {}, [["x", 1.0, 0.6, "c|0.6", 60]], now, False))[2] is None
    assert await store.spent("x") == pytest.approx(0.6)
    # The dead worker's call settling late adds its exact cost only.
    await store.settle(LimitSettlement("b", settles=[["x", 0.6, 0.1, "dead|0.6"]]), now)
    assert await store.spent("x") == pytest.approx(0.7)
    await store.settle(LimitSettlement("b", settles=[["x", 0.6, 0.2, "c|0.6"]]), now)
    assert await store.spent("x") == pytest.approx(0.3)
    await store.aclose()


async def test_budgeted_calls_settle_their_reservations(
    vendors: list[Any], store_kind: str | None
) -> None:
    v = LimitedVendor(requests=1000).start()
    vendors.append(v)
    prices = ModelPrices(input=1_000.0, output=2_000.0)
    model = Model(
        id="m-1", api="openai-completions", provider="openai", base_url=v.url,
        max_tokens=20, prices=prices,
    )  # fmt: skip
    _configure(store_kind, budget_usd=1.0)
    found = [await complete(model, CONTEXT, StreamOptions(api_key="k")) for _ in range(3)]
    assert all(m.error is None for m in found)
    from stream_core import budget_spent

    assert await budget_spent() == pytest.approx(sum(m.usage.cost.total for m in found))
