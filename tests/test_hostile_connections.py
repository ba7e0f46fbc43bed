"""Connections under hostile servers (issue 23, point 8 and the Low items on connections):
a kept-alive connection carries nothing from one call into the next, and a finished call
gives its pool slot back at once.
"""

from __future__ import annotations

import json
import os
import signal
import time
import warnings

import anyio
import pytest
from threaded_loopback import EVENTS, GUARD, HEAD, Connection, chunk, head_then_hold, loopback

import stream_core
from stream_core import Context, MessageEnd, MessageUpdate, StreamOptions, UserMessage

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hi")])


def _sse(text: str) -> bytes:
    def event(name: str, data: object) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    usage = {"input_tokens": 3, "output_tokens": 1}
    return b"".join(
        [
            event(
                "message_start", {"type": "message_start", "message": {"id": "m", "usage": usage}}
            ),
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            ),
            event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 2},
                },
            ),
            event("message_stop", {"type": "message_stop"}),
        ]
    )


def _response(text: str) -> bytes:
    body = _sse(text)
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    )
    return head + body


async def test_a_second_response_in_the_same_write_never_answers_the_next_call() -> None:
    served = 0

    def answer(conn: Connection) -> None:
        nonlocal served
        served += 1
        if served == 1:
            # The answer, and right behind it, in the same write, a whole second response.
            conn.send(_response("first") + _response("SMUGGLED"))
        else:
            conn.send(_response(f"real {served}"))

    with loopback(answer) as server:
        options = StreamOptions(api_key="sk-test-0123456789")
        texts = []
        with anyio.fail_after(GUARD):
            for _ in range(3):
                message = await stream_core.complete(server.model(), CONTEXT, options)
                assert message.error is None, message.error
                texts.append(message.text())
                await anyio.sleep(0.05)  # the detached drain gives the connection back
    assert texts == ["first", "real 2", "real 3"]
    # The poisoned connection was closed; the next calls shared a fresh one.
    assert len(server.connections) == 2


async def test_a_clean_connection_is_still_reused() -> None:
    def answer(conn: Connection) -> None:
        conn.send(_response("ok"))

    with loopback(answer) as server:
        options = StreamOptions(api_key="sk-test-0123456789")
        with anyio.fail_after(GUARD):
            for _ in range(3):
                assert (await stream_core.complete(server.model(), CONTEXT, options)).text() == "ok"
                await anyio.sleep(0.05)
    assert len(server.connections) == 1


def _answer_then_hold(conn: Connection) -> None:
    """The whole answer, terminal event included, then the body stays open (a proxy that
    never ends its chunked body)."""
    if conn.send(HEAD + b"\r\n" + b"".join(chunk(e) for e in EVENTS)):
        conn.hold()


async def test_a_finished_calls_drain_never_keeps_a_waiting_call_out() -> None:
    stream_core.configure_connections(max_connections=2)
    try:
        with loopback(_answer_then_hold) as server:
            # Before: each finished call's drain held its connection for 5 s, so the third
            # of these back-to-back calls waited past pool_timeout: "connection pool full".
            options = StreamOptions(api_key="sk-test-0123456789", pool_timeout=2.0)
            with anyio.fail_after(GUARD):
                messages = [
                    await stream_core.complete(server.model(), CONTEXT, options) for _ in range(5)
                ]
    finally:
        stream_core.configure_connections()
    assert [m.error for m in messages] == [None] * 5
    assert [m.text() for m in messages] == ["ab"] * 5


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
async def test_a_stream_iterated_in_a_forked_child_ends_at_once() -> None:
    with loopback(head_then_hold) as server:
        options = StreamOptions(api_key="sk-test-0123456789")
        async with stream_core.stream(server.model(), CONTEXT, options) as s:
            async for event in s:
                if isinstance(event, MessageUpdate):
                    break  # the body is open, some text read
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "multi-threaded process, fork()" on 3.12+
                pid = os.fork()
            if pid == 0:  # the child: the same stream, iterated on
                code = 3
                try:
                    ends = [e async for e in s if isinstance(e, MessageEnd)]
                    error = s.message.error
                    code = 0 if len(ends) == 1 and error and "fork()" in error.message else 1
                finally:
                    os._exit(code)
            deadline = time.monotonic() + GUARD
            status = None
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                await anyio.sleep(0.02)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the child hung on a stream opened before fork()")
            assert os.waitstatus_to_exitcode(status) == 0
            # The parent's stream is untouched by the child.
            assert s.message.error is None
