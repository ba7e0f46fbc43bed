"""The connection pool: its size set without building a client, no limit by default, the
pool wait's own timeout and error, and a burst of more streams than the old 256-connection
pool held, over real loopback sockets, asyncio and trio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import SocketAttribute, SocketStream
from threaded_loopback import read_request

import stream_core
from stream_core import _connections, _transport
from stream_core.contract_tests.kit import options, text_case

ROOT = Path(__file__).resolve().parent.parent
API = "anthropic-messages"
HIT = 20.0  # a guard against hangs, not a timing assertion


@pytest.fixture(autouse=True)
def _default_limits() -> Iterator[None]:
    yield
    stream_core.configure_connections()


class _Server:
    """Answers every request with a text stream; the first `hold` requests stop after the
    headers until `release` is set. Counts requests and the most connections open at once."""

    def __init__(self, hold: int = 0) -> None:
        self.hold = hold
        self.requests = 0
        self.open = 0
        self.most_open = 0
        self.release = anyio.Event()
        self.port = 0

    async def serve(self, conn: SocketStream) -> None:
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        buf = b""
        try:
            async with conn:
                while True:
                    buf = await read_request(conn, buf)
                    self.requests += 1
                    await conn.send(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n"
                    )
                    if self.requests <= self.hold:
                        await self.release.wait()
                    body = text_case(API).body
                    await conn.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self.open -= 1

    def model(self) -> stream_core.Model:
        return stream_core.Model(
            id="m", api=API, provider="loopback", base_url=f"http://127.0.0.1:{self.port}"
        )


async def _call(
    model: stream_core.Model, results: list[stream_core.AssistantMessage], **opts: object
) -> None:
    ctx = {"messages": [{"role": "user", "content": "hi"}]}
    async with stream_core.stream(model, ctx, options(**opts)) as s:
        results.append(await s.result())


# --- settings -----------------------------------------------------------------------------


def test_the_shared_pool_has_no_connection_limit_by_default() -> None:
    """If this fails: a gateway's streams above the limit queue behind streams that last
    minutes, then fail `timeout` (1,000 calls: all failed after 424 s with a 256 limit)."""
    limits = _transport.shared_limits()
    assert limits.max_connections is None
    assert limits.max_keepalive_connections == _connections.DEFAULT_MAX_KEEPALIVE


def test_configure_connections_sets_the_limits_of_new_shared_clients() -> None:
    stream_core.configure_connections(max_connections=8, max_keepalive=2, keepalive_expiry=5)
    limits = _transport.shared_limits()
    assert (limits.max_connections, limits.max_keepalive_connections) == (8, 2)
    assert limits.keepalive_expiry == 5.0
    stream_core.configure_connections()  # every argument back to its default
    assert _transport.shared_limits().max_connections is None


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"max_connections": 0}, ValueError, "max_connections"),
        ({"max_connections": "10"}, TypeError, "max_connections"),
        ({"max_connections": True}, TypeError, "max_connections"),
        ({"max_keepalive": -1}, ValueError, "max_keepalive"),
        ({"keepalive_expiry": 0}, ValueError, "keepalive_expiry"),
        ({"keepalive_expiry": float("inf")}, ValueError, "keepalive_expiry"),
    ],
)
def test_configure_connections_rejects_bad_values_naming_them(
    kwargs: dict[str, object], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        stream_core.configure_connections(**kwargs)  # type: ignore[arg-type]
    assert _transport.shared_limits().max_connections is None  # nothing half-set


@pytest.mark.parametrize("value", [0, -1, "1", float("nan")])
def test_pool_timeout_is_checked_like_the_other_timeouts(value: object) -> None:
    with pytest.raises((TypeError, ValueError), match="pool_timeout"):
        stream_core.StreamOptions(pool_timeout=value)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_new_limit_applies_to_the_next_call_on_a_running_loop() -> None:
    before = await _transport.shared_client_async()
    stream_core.configure_connections(max_connections=3)
    after = await _transport.shared_client_async()
    assert after is not before and not before.is_closed  # its open streams finish on it
    assert await _transport.shared_client_async() is after


# --- the pool wait ------------------------------------------------------------------------


async def _pool_full(server: _Server, injected: bool) -> list[stream_core.AssistantMessage]:
    results: list[stream_core.AssistantMessage] = []
    client = None
    if injected:
        client = httpx.AsyncClient(limits=httpx.Limits(max_connections=2))
    else:
        stream_core.configure_connections(max_connections=2)
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(lambda: _call(server.model(), results, client=client))
            while server.requests < 2:
                await anyio.sleep(0.01)
            # Both connections are busy: the third call waits for one, past pool_timeout.
            await _call(server.model(), results, client=client, pool_timeout=0.2)
            server.release.set()
    finally:
        if client is not None:
            await client.aclose()
    return results


@pytest.mark.anyio
@pytest.mark.parametrize("injected", [False, True])
async def test_a_full_pool_ends_the_call_timeout_naming_it_and_is_not_retried(
    injected: bool,
) -> None:
    """If this fails: a call waiting for a connection ends as a retryable `PoolTimeout`
    (spending its retries queueing again behind the same streams) or waits without bound."""
    server = _Server(hold=2)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server.port = listener.extra(SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.serve)
        with anyio.fail_after(HIT):
            results = await _pool_full(server, injected)
        tg.cancel_scope.cancel()
    waited, *held = results
    assert waited.stop_reason == "error" and waited.error is not None
    assert waited.error.kind == "timeout" and not waited.error.retryable
    assert waited.error.message.startswith("connection pool full: 2 in use")
    assert "pool_timeout=0.2" in waited.error.message
    assert server.requests == 2  # the waiting call sent nothing, and was not retried
    assert [m.stop_reason for m in held] == ["stop", "stop"]


@pytest.mark.anyio
async def test_more_streams_than_the_old_pool_held_are_all_open_at_once() -> None:
    """If this fails: above 256 concurrent streams the shared client queues the rest (they
    run in batches or fail `timeout`)."""
    count = 300
    server = _Server(hold=count)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", backlog=1024)
    server.port = listener.extra(SocketAttribute.local_port)
    results: list[stream_core.AssistantMessage] = []
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.serve)
        with anyio.fail_after(HIT):
            async with anyio.create_task_group() as calls:
                for _ in range(count):
                    calls.start_soon(lambda: _call(server.model(), results))
                while server.requests < count:
                    await anyio.sleep(0.01)
                assert server.most_open == count  # every stream has its own connection
                server.release.set()
        tg.cancel_scope.cancel()
    assert [m.stop_reason for m in results] == ["stop"] * count


# --- a hostile burst ----------------------------------------------------------------------


def test_a_hostile_burst_above_the_old_pool_size_ends_every_stream_once_with_its_kind() -> None:
    """If this fails: a burst of concurrent calls against a server that resets, stalls, sends
    junk or answers 429/500 spends minutes of CPU in httpcore's pool queue (1,000 calls had
    not finished after 300 s). Each call's behaviour is fixed (the same on every attempt),
    so its kind is known. 400 calls (the old pool held 256) keep this test short;
    `benchmarks/scale.py --hostile` runs 1,000 the same way."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--hostile"]
    out = subprocess.run(
        [*command, "--calls", "400", "--first-byte", "6"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["wrong"] == [] and result["wrong_count"] == 0
    kinds = result["kinds"]
    assert sum(kinds.values()) == 400
    # Every behaviour came up, so every kind was checked.
    assert set(kinds) == {
        "ok None",
        "ok rate_limit",
        "ok server",
        "ok network",
        "ok timeout",
        "ok protocol",
    }
