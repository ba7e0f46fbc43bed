"""Leaving a stream stops the request: `async with` left by break, return or an exception,
and a `for` over `stream_sync` left early, close the socket at once; the message ends
`aborted` with what arrived, and `result()` afterwards reads nothing more."""

from __future__ import annotations

import socketserver
import threading
import time
from collections.abc import Iterator

import anyio
import pytest

from stream_core import (
    AssistantMessage,
    Context,
    MessageUpdate,
    Model,
    StreamOptions,
    TextDelta,
    UserMessage,
    stream,
    stream_sync,
)

GAP = 0.1
DELTAS = 30  # a whole answer takes 3 s; an abort must not wait for it
EVENTS = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n',
    *[
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"ab"}}\n\n'
    ]
    * DELTAS,
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":31}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


class Slow(socketserver.BaseRequestHandler):
    closed_early: list[bool]

    def handle(self) -> None:
        self.request.recv(65536)
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        try:
            self.request.sendall(head)
            for event in EVENTS:
                self.request.sendall(b"%x\r\n%s\r\n" % (len(event), event))
                time.sleep(GAP)
            self.request.sendall(b"0\r\n\r\n")
        except OSError:
            self.closed_early.append(True)  # the client closed the connection
            return
        self.closed_early.append(False)


@pytest.fixture
def server() -> Iterator[tuple[Model, list[bool]]]:
    closed: list[bool] = []
    handler = type("Handler", (Slow,), {"closed_early": closed})
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as srv:
        srv.daemon_threads = True
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        port = srv.server_address[1]
        model = Model(
            id="claude-x",
            api="anthropic-messages",
            provider="local",
            base_url=f"http://127.0.0.1:{port}",
        )
        yield model, closed
        srv.shutdown()


CONTEXT = Context(messages=[UserMessage(content="hi")])


def options() -> StreamOptions:
    return StreamOptions(api_key="sk-local-0123456789", max_retries=0)


def wait_for(closed: list[bool]) -> bool:
    deadline = time.monotonic() + 2
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(closed) and closed[0]


def check_aborted(message: AssistantMessage, elapsed: float) -> None:
    assert message.stop_reason == "aborted" and message.error is not None
    assert message.error.kind == "aborted"
    assert message.text() in ("ab" * n for n in range(DELTAS))  # what arrived, kept
    assert elapsed < 1.5, f"took {elapsed:.2f}s: the rest of the answer was read"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("how", ["break", "return", "exception"])
def test_leaving_async_with_aborts_at_once(
    server: tuple[Model, list[bool]], backend: str, how: str
) -> None:
    model, closed = server

    async def consume() -> AssistantMessage:
        async with stream(model, CONTEXT, options()) as s:
            async for event in s:
                if isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta):
                    if how == "return":
                        return s.message
                    if how == "exception":
                        raise KeyError("the harness gave up")
                    break
        return s.message

    async def main() -> tuple[AssistantMessage, AssistantMessage, float]:
        started = time.perf_counter()
        try:
            live = await consume()
        except KeyError:
            live = None  # type: ignore[assignment]
        elapsed = time.perf_counter() - started
        return live, elapsed  # type: ignore[return-value]

    live, elapsed = anyio.run(main, backend=backend)  # type: ignore[misc]
    if live is not None:
        check_aborted(live, elapsed)
    assert wait_for(closed), "the server kept sending: the socket was not closed"


def test_result_after_leaving_reads_nothing_more(server: tuple[Model, list[bool]]) -> None:
    model, closed = server

    async def main() -> tuple[AssistantMessage, float]:
        async with stream(model, CONTEXT, options()) as s:
            async for event in s:
                if isinstance(event, MessageUpdate):
                    break
        started = time.perf_counter()
        message = await s.result()
        return message, time.perf_counter() - started

    message, elapsed = anyio.run(main)
    check_aborted(message, elapsed)
    assert elapsed < 0.1
    assert wait_for(closed)


def test_breaking_out_of_stream_sync_aborts_at_once(server: tuple[Model, list[bool]]) -> None:
    model, closed = server
    started = time.perf_counter()
    it = stream_sync(model, CONTEXT, options())
    for event in it:
        if isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta):
            break
    message = it.result()
    check_aborted(message, time.perf_counter() - started)
    assert wait_for(closed)


def test_leaving_a_sync_with_aborts_at_once(server: tuple[Model, list[bool]]) -> None:
    model, closed = server
    started = time.perf_counter()
    with stream_sync(model, CONTEXT, options()) as s:
        for event in s:
            if isinstance(event, MessageUpdate):
                break
    check_aborted(s.result(), time.perf_counter() - started)
    assert wait_for(closed)


def test_reading_to_the_end_is_the_explicit_result_call(server: tuple[Model, list[bool]]) -> None:
    model, closed = server

    async def main() -> AssistantMessage:
        async with stream(model, CONTEXT, options()) as s:
            return await s.result()  # inside the block: read the rest, on purpose

    message = anyio.run(main)
    assert message.stop_reason == "stop" and message.text() == "ab" * DELTAS
    assert wait_for(closed) is False
