"""Sync calls: the same events and message as the async API, from any thread, incremental,
and closed (response and worker read) on break, `close()` or leaving `with`."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from stream_core import (
    AssistantStreamEvent,
    Context,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    StreamOptions,
    SyncStream,
    TextDelta,
    UserMessage,
    complete_sync,
    get_model,
    stream_sync,
)

MODEL = get_model("anthropic", "claude-sonnet-4-5")
CONTEXT = Context(messages=[UserMessage(content="hi")])


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


HEAD = (
    sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": "claude-sonnet-4-5-20250929",
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        },
    )
    + sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    + sse(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
    )
)
TAIL = (
    sse(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
    )
    + sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    + sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
    )
    + sse("message_stop", {"type": "message_stop"})
)


class GatedBody(httpx.AsyncByteStream):
    """Sends HEAD, then TAIL only once `gate` is set; records that it was closed."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.closed = threading.Event()
        self.waiting = threading.Event()
        """Set once the reader asked for more than HEAD."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield HEAD
        self.waiting.set()
        # The test's stand-in for a slow vendor; bounded, so a pipeline that collected
        # events before handing them over fails the assertions instead of hanging.
        for _ in range(2000):
            if self.gate.is_set():
                break
            await anyio.sleep(0.005)
        yield TAIL

    async def aclose(self) -> None:
        self.closed.set()


def options_for(body: GatedBody | bytes) -> StreamOptions:
    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", "request-id": "req_sync"}
        if isinstance(body, bytes):
            return httpx.Response(200, headers=headers, content=body)
        return httpx.Response(200, headers=headers, stream=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return StreamOptions(api_key="sk-test-0000", client=client)


def is_text(event: AssistantStreamEvent) -> bool:
    return isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta)


def test_events_arrive_as_the_vendor_sends_them() -> None:
    body = GatedBody()
    events = []
    with stream_sync(MODEL, CONTEXT, options_for(body)) as s:
        assert isinstance(s, SyncStream)
        for event in s:
            events.append(event)
            if is_text(event) and not body.gate.is_set():
                # The tail has not been sent yet: this delta was not collected then replayed.
                assert s.message.text() == "Hel"
                body.gate.set()
        message = s.result()
    assert isinstance(events[0], MessageStart) and isinstance(events[-1], MessageEnd)
    assert [e.delta.delta for e in events if is_text(e)] == ["Hel", "lo"]  # type: ignore[union-attr]
    assert message.text() == "Hello" and message.stop_reason == "stop"
    assert message.response_model == "claude-sonnet-4-5-20250929"
    assert message.request_id == "req_sync"
    assert body.closed.is_set()


def test_break_closes_the_response_and_ends_the_message_aborted() -> None:
    body = GatedBody()
    for event in stream_sync(MODEL, CONTEXT, options_for(body)):
        if is_text(event):
            message = event.message
            break
    # Dropping the iterator closed it: the response is closed before the gate ever opens.
    assert body.closed.is_set() and not body.gate.is_set()
    assert message.stop_reason == "aborted" and message.error is not None
    assert message.text() == "Hel"


def test_close_from_another_thread_while_next_waits() -> None:
    body = GatedBody()
    s = stream_sync(MODEL, CONTEXT, options_for(body))
    seen: list[AssistantStreamEvent] = []
    got_text = threading.Event()

    def consume() -> None:
        for event in s:
            seen.append(event)
            if is_text(event):
                got_text.set()

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert got_text.wait(10)
    s.close()  # the consumer is (or is about to be) blocked waiting for the tail
    consumer.join(10)
    assert not consumer.is_alive()
    assert isinstance(seen[-1], MessageEnd)
    assert s.message.stop_reason == "aborted"
    assert body.closed.is_set() and not body.gate.is_set()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")
def test_ctrl_c_while_waiting_closes_the_stream() -> None:
    body = GatedBody()
    s = stream_sync(MODEL, CONTEXT, options_for(body))
    main = threading.get_ident()

    def press_ctrl_c() -> None:
        body.waiting.wait(10)  # the main thread now waits in next() for the tail
        signal.pthread_kill(main, signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    started = time.monotonic()
    # Python's own Ctrl-C handler, whatever this process inherited: a shell starts a
    # background job with SIGINT ignored, and Python then keeps it ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        presser.start()
        with pytest.raises(KeyboardInterrupt):
            for _ in s:
                pass
        presser.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert body.closed.is_set() and not body.gate.is_set()
    assert s.message.stop_reason == "aborted", (s.message, time.monotonic() - started)


def test_complete_sync_returns_the_final_message() -> None:
    message = complete_sync(MODEL, CONTEXT, options_for(HEAD + TAIL))
    assert message.text() == "Hello" and message.usage.output == 2
    assert message.duration_ms is not None and message.ttft_ms is not None


def test_sync_calls_work_inside_a_running_event_loop() -> None:
    # Jupyter's case: the calling thread is running a loop, so anyio.run could not be used.
    async def notebook_cell() -> tuple[str, str]:
        answer = complete_sync(MODEL, CONTEXT, options_for(HEAD + TAIL))
        texts = [
            e.delta.delta  # type: ignore[union-attr]
            for e in stream_sync(MODEL, CONTEXT, options_for(HEAD + TAIL))
            if is_text(e)
        ]
        return answer.text(), "".join(texts)

    assert asyncio.run(notebook_cell()) == ("Hello", "Hello")


@pytest.mark.anyio
async def test_sync_calls_work_under_any_running_backend() -> None:
    assert complete_sync(MODEL, CONTEXT, options_for(HEAD + TAIL)).text() == "Hello"


def test_one_client_serves_many_sync_calls() -> None:
    # Every sync call runs on the same background loop, so a client's pool stays usable.
    options = options_for(HEAD + TAIL)
    assert [complete_sync(MODEL, CONTEXT, options).text() for _ in range(3)] == ["Hello"] * 3


def test_programmer_errors_raise_at_the_call() -> None:
    with pytest.raises(TypeError, match="stream_core.Model"):
        stream_sync("claude", CONTEXT)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="context.system"):
        complete_sync(MODEL, {"system": "x"})


def test_failures_end_the_stream_as_data() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"type": "error", "error": {"message": "bad key"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    s = stream_sync(MODEL, CONTEXT, StreamOptions(api_key="sk-test-0000", client=client))
    events = list(s)
    assert [type(e) for e in events] == [MessageStart, MessageEnd]
    assert s.message.error is not None and s.message.error.kind == "auth"


LEFT_OPEN = """
import anyio, httpx
from stream_core import (
    Context, MessageUpdate, StreamOptions, UserMessage, get_model, stream_sync)

class Silent(httpx.AsyncByteStream):
    async def __aiter__(self):
        yield HEAD
        await anyio.sleep_forever()

client = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(
    200, headers={"content-type": "text/event-stream"}, stream=Silent())))
s = stream_sync(get_model("anthropic", "claude-sonnet-4-5"),
                Context(messages=[UserMessage(content="hi")]),
                StreamOptions(api_key="sk-test-0000", client=client))
for event in s:
    if isinstance(event, MessageUpdate):
        break
print(s.message.text())
"""


def test_a_script_exits_with_a_stream_left_open() -> None:
    # `s` is still open when the script ends; tearing it down must not wait on the loop.
    done = subprocess.run(
        [sys.executable, "-c", f"HEAD = {HEAD!r}\n" + LEFT_OPEN],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hel"
