"""The read loop's mechanics over a real loopback socket and with mocks, asyncio and trio:
connection reuse, the socket-level idle timeout, cancel while blocked in a read, and an
`options.cancel` that is never set changing nothing (CONTRACT 4)."""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import SocketAttribute, SocketStream
from threaded_loopback import read_request

import stream_core
from stream_core import MessageUpdate, StreamError, TextDelta, ThinkingDelta
from stream_core.contract_tests.kit import (
    API_KEY,
    Run,
    apis_under_test,
    framing,
    options,
    run_provider,
    text_case,
    vendor_response,
)

APIS = apis_under_test()
HIT = 5.0  # a guard against hangs, not a timing assertion


def _text_body(api: str) -> bytes:
    return text_case(api).body


def _events(api: str, body: bytes) -> list[bytes]:
    return framing(api).frames(body)


def _head(api: str) -> bytes:
    """The first half of the events: some text, no terminal event."""
    events = _events(api, _text_body(api))
    return b"".join(events[: max(3, len(events) // 2)])


# --- a loopback HTTP/1.1 server in the test's own event loop ------------------------------


class _Reset(Exception):
    """Raised by a handler: the server resets the connection."""


Writer = Callable[[bytes], Awaitable[None]]
Handler = Callable[[Writer], Awaitable[None]]


class Loopback:
    """Serves each request with the next handler, as a chunked text/event-stream (one HTTP
    chunk per `write`), keeping connections alive; counts connections."""

    def __init__(self, handlers: list[Handler], media_type: bytes = b"text/event-stream") -> None:
        self.handlers = handlers
        self.media_type = media_type
        self.connections = 0
        self.port = 0

    async def serve(self, conn: SocketStream) -> None:
        self.connections += 1
        buf = b""
        async with conn:
            while self.handlers:
                try:
                    buf = await read_request(conn, buf)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                handler = self.handlers.pop(0)
                await conn.send(
                    b"HTTP/1.1 200 OK\r\ncontent-type: " + self.media_type + b"\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )

                async def write(data: bytes) -> None:
                    await conn.send(b"%x\r\n%s\r\n" % (len(data), data))

                try:
                    await handler(write)
                    await conn.send(b"0\r\n\r\n")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                except _Reset:
                    # Linger 0: closing sends a TCP reset, not an orderly end.
                    sock = conn.extra(SocketAttribute.raw_socket)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return

    def model(self, api: str) -> stream_core.Model:
        return stream_core.Model(
            id="m", api=api, provider="loopback", base_url=f"http://127.0.0.1:{self.port}"
        )


async def _with_server(
    handlers: list[Handler], body: Callable[[Loopback], Awaitable[Any]], api: str
) -> tuple[Loopback, Any]:
    server = Loopback(handlers, framing(api).media_type.encode())
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server.port = listener.extra(SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.serve)
        try:
            with anyio.fail_after(HIT):
                result = await body(server)
        finally:
            tg.cancel_scope.cancel()
    return server, result


def _send_all(api: str, data: bytes) -> Handler:
    async def handler(write: Writer) -> None:
        for event in _events(api, data):  # one chunk per event, as the vendors write them
            await write(event)

    return handler


def _stall_after(data: bytes, seconds: float = 3600) -> Handler:
    async def handler(write: Writer) -> None:
        await write(data)
        await anyio.sleep(seconds)

    return handler


async def _call(model: stream_core.Model, **opts: Any) -> stream_core.AssistantMessage:
    ctx = {"messages": [{"role": "user", "content": "hi"}]}
    async with stream_core.stream(model, ctx, options(**opts)) as s:
        return await s.result()


# --- connection reuse ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_second_call_opens_no_new_connection(api: str) -> None:
    """If this fails: without an injected client every call pays a new connection (and a
    new client's TLS set-up): ~15x the per-call overhead of a reused client."""
    body = _text_body(api)

    async def two_calls(server: Loopback) -> list[stream_core.AssistantMessage]:
        return [await _call(server.model(api)), await _call(server.model(api))]

    server, messages = await _with_server(
        [_send_all(api, body), _send_all(api, body)], two_calls, api
    )
    assert [m.stop_reason for m in messages] == ["stop", "stop"]
    assert messages[0].text() == messages[1].text() != ""
    assert server.connections == 1


@pytest.mark.anyio
async def test_the_shared_client_is_one_per_event_loop() -> None:
    from stream_core._transport import shared_client

    first = shared_client()
    assert shared_client() is first and not first.is_closed


# --- idle timeout and cancel on a real socket ---------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("injected", [False, True])
async def test_idle_stall_over_a_socket_ends_timeout(api: str, injected: bool) -> None:
    """If this fails: a server that stops sending mid-body hangs the caller."""

    async def call(server: Loopback) -> stream_core.AssistantMessage:
        if not injected:
            return await _call(server.model(api), idle_timeout=0.2)
        async with httpx.AsyncClient() as client:
            return await _call(server.model(api), idle_timeout=0.2, client=client)

    _, message = await _with_server([_stall_after(_head(api))], call, api)
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "timeout"
    assert message.error.retryable and "idle_timeout=0.2" in message.error.message
    assert message.content  # what arrived before is kept


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_cancel_while_blocked_in_a_socket_read(api: str) -> None:
    """If this fails: `options.cancel` waits for the next chunk (or the 120 s idle
    timeout, far past the test's guard) instead of stopping at once."""
    cancel = anyio.Event()

    async def call(server: Loopback) -> tuple[stream_core.AssistantMessage, list[str]]:
        types: list[str] = []
        ctx = {"messages": [{"role": "user", "content": "hi"}]}
        async with anyio.create_task_group() as tg:
            async with stream_core.stream(server.model(api), ctx, options(cancel=cancel)) as s:
                async for event in s:
                    types.append(event.type)
                    first_delta = isinstance(event, MessageUpdate) and isinstance(
                        event.delta, (TextDelta, ThinkingDelta)
                    )
                    if first_delta and "set" not in types:
                        types.append("set")  # set it while the next read is blocked
                        tg.start_soon(_set_later, cancel)
            message = await s.result()
        return message, types

    _, (message, types) = await _with_server([_stall_after(_head(api))], call, api)
    assert message.stop_reason == "aborted"
    assert message.error is not None and message.error.kind == "aborted"
    assert message.content  # what arrived before is kept
    assert types[0] == "message_start" and types[-1] == "message_end"


async def _set_later(event: anyio.Event) -> None:
    await anyio.sleep(0.05)
    event.set()


# --- an unset options.cancel changes nothing (issue 5 section 2) ----------------------------


def _dropped(api: str, how: str) -> httpx.Response:
    head = _head(api)

    async def body() -> AsyncIterator[bytes]:
        yield head
        if how == "read_error":
            raise httpx.ReadError("connection reset by peer")
        if how == "reset":
            raise httpx.RemoteProtocolError("peer closed connection without sending complete")

    return vendor_response(api, body)


def _summary(run: Run) -> tuple[str | None, StreamError | None, int, str]:
    m = run.message
    return m.stop_reason, m.error, run.calls, m.text()


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["eof", "read_error", "reset"])
async def test_unset_cancel_event_keeps_mid_body_failures_network(api: str, how: str) -> None:
    """If this fails: passing a cancel event turns a dropped connection into a
    non-retryable protocol error (an exception group leaking out)."""
    without = await run_provider(api, [_dropped(api, how)], opts=options())
    with_event = await run_provider(api, [_dropped(api, how)], opts=options(cancel=anyio.Event()))
    error = with_event.message.error
    assert error is not None and error.kind == "network" and error.retryable
    assert "stream ended before" in error.message
    assert _summary(with_event) == _summary(without)


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_unset_cancel_event_keeps_connect_errors_retried(api: str) -> None:
    ok = vendor_response(api, [_text_body(api)])
    run = await run_provider(
        api,
        [httpx.ConnectError("connection refused"), ok],
        opts=options(cancel=anyio.Event(), max_retries=1),
    )
    assert run.calls == 2
    assert run.message.stop_reason == "stop" and run.message.error is None


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_unset_cancel_event_over_a_socket_reset(api: str) -> None:
    """A real TCP reset mid-body is `network`, retryable, with an unset cancel event."""

    async def reset(write: Writer) -> None:
        await write(_head(api))
        await anyio.sleep(0.05)  # let the client read the head first
        raise _Reset

    async def call(server: Loopback) -> stream_core.AssistantMessage:
        return await _call(server.model(api), cancel=anyio.Event())

    _, message = await _with_server([reset], call, api)
    assert message.error is not None and message.error.kind == "network"
    assert message.error.retryable and message.content
    assert "stream ended before" in message.error.message


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_setting_the_event_mid_stream_aborts_keeping_content(api: str) -> None:
    closed: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield _head(api)
            await anyio.sleep(3600)
        finally:
            closed.append(True)

    cancel = anyio.Event()
    model = stream_core.Model(id="m", api=api, provider="contract", base_url="https://c.test")
    import respx

    with respx.mock() as mock, anyio.fail_after(HIT):
        mock.route(host="c.test").mock(return_value=vendor_response(api, body))
        async with anyio.create_task_group() as tg:
            ctx = {"messages": [{"role": "user", "content": "hi"}]}
            async with stream_core.stream(model, ctx, options(cancel=cancel)) as s:
                async for event in s:
                    if isinstance(event, MessageUpdate) and isinstance(
                        event.delta, (TextDelta, ThinkingDelta)
                    ):
                        tg.start_soon(_set_later, cancel)  # set while blocked in the read
            message = await s.result()
    assert message.stop_reason == "aborted"
    assert message.error is not None and message.error.kind == "aborted"
    assert message.content and closed == [True]
    assert API_KEY not in repr(message)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_shared_client_is_closed_when_the_loop_ends(backend: str) -> None:
    """If this fails: the default client leaks its connections (a ResourceWarning, which
    this suite turns into an error) when `anyio.run` / `asyncio.run` / `trio.run` ends."""
    from stream_core._transport import shared_client

    api = APIS[0]
    seen: list[httpx.AsyncClient] = []

    async def main() -> None:
        async def call(server: Loopback) -> stream_core.AssistantMessage:
            return await _call(server.model(api))

        _, message = await _with_server([_send_all(api, _text_body(api))], call, api)
        assert message.stop_reason == "stop"
        seen.append(shared_client())
        assert not seen[0].is_closed

    anyio.run(main, backend=backend)
    assert seen[0].is_closed


# --- total_timeout: a bound on the whole call ------------------------------------------------


def _trickle_after(api: str, every: float) -> Handler:
    """Half of the answer at once, then the rest one byte every `every` seconds: each read
    comes well within the idle timeout, so only a bound on the whole call stops it."""
    events = _events(api, _text_body(api))
    head = _head(api)
    rest = b"".join(events)[len(head) :]

    async def handler(write: Writer) -> None:
        await write(head)
        for i in range(len(rest)):
            await anyio.sleep(every)
            await write(rest[i : i + 1])
        await anyio.sleep(3600)

    return handler


def _assert_total_timeout(message: stream_core.AssistantMessage, limit: float) -> None:
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "timeout"
    assert f"total_timeout={limit}" in message.error.message
    assert not message.error.retryable
    assert message.content  # what arrived before is kept


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("injected", [False, True])
async def test_a_trickling_server_is_stopped_by_total_timeout(api: str, injected: bool) -> None:
    """If this fails: a server sending a byte just inside the idle timeout holds the call
    for ever (here it would take minutes; the guard is HIT seconds)."""

    async def call(server: Loopback) -> tuple[stream_core.AssistantMessage, float]:
        started = anyio.current_time()
        opts: dict[str, Any] = {"idle_timeout": 0.5, "total_timeout": 1.0}
        if injected:
            async with httpx.AsyncClient() as client:
                message = await _call(server.model(api), client=client, **opts)
        else:
            message = await _call(server.model(api), **opts)
        return message, anyio.current_time() - started

    _, (message, took) = await _with_server([_trickle_after(api, 0.3)], call, api)
    _assert_total_timeout(message, 1.0)
    assert 0.9 <= took < 3.0


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_total_timeout_interrupts_a_read_blocked_on_the_socket(api: str) -> None:
    """If this fails: with no idle timeout, the deadline waits for a byte that never comes
    (the watcher must shut the socket down, as it does for `options.cancel`)."""

    async def call(server: Loopback) -> stream_core.AssistantMessage:
        return await _call(server.model(api), idle_timeout=None, total_timeout=0.5)

    _, message = await _with_server([_stall_after(_head(api))], call, api)
    _assert_total_timeout(message, 0.5)


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_total_timeout_on_a_body_not_read_from_a_socket(api: str) -> None:
    """A mock transport's body is read inside a scope per read: the deadline bounds it."""
    events = _events(api, _text_body(api))
    head = _head(api)
    rest = b"".join(events)[len(head) :]

    async def chunks() -> AsyncIterator[bytes]:
        yield head
        for i in range(len(rest)):
            await anyio.sleep(0.3)
            yield rest[i : i + 1]

    with anyio.fail_after(HIT):
        run = await run_provider(
            api,
            [vendor_response(api, chunks)],
            opts=options(idle_timeout=0.5, total_timeout=1.0),
        )
    _assert_total_timeout(run.message, 1.0)


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
async def test_total_timeout_stops_waiting_for_the_headers(api: str) -> None:
    """A server that never answers is bounded by total_timeout before first_byte_timeout."""

    async def never(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(3600)
        raise AssertionError("unreachable")

    with anyio.fail_after(HIT):
        run = await run_provider(api, never, opts=options(total_timeout=0.3))
    assert run.message.error is not None and run.message.error.kind == "timeout"
    assert "total_timeout=0.3" in run.message.error.message


def test_total_timeout_is_checked_like_the_other_timeouts() -> None:
    assert stream_core.StreamOptions().total_timeout is None
    with pytest.raises(ValueError, match=r"StreamOptions\.total_timeout"):
        stream_core.StreamOptions(total_timeout=0)
    with pytest.raises(TypeError, match=r"StreamOptions\.total_timeout"):
        stream_core.StreamOptions(total_timeout="5")  # type: ignore[arg-type]
