"""A stream closed before its body ends leaves nothing to the garbage collector (issue 17
§6): however it is closed (`aclose()`, `options.cancel`, a cancel scope around a blocked
read or between events, `total_timeout`, the idle timeout, leaving `async with` early, an
abandoned stream, a compressed body, an error body past its cap, plain or compressed),
under asyncio and trio, over a real loopback socket. httpx and httpcore nest five async
generators per body; one left suspended is finalized by the GC, which trio reports as a
`ResourceWarning` (and an "Exception ignored" traceback when warnings are errors)."""

from __future__ import annotations

import gc
import sys
import warnings
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from threaded_loopback import EVENTS, GUARD, HEAD, Connection, chunk, head_then_hold, loopback

from stream_core import (
    AssistantMessage,
    Context,
    MessageUpdate,
    Model,
    StreamOptions,
    TextDelta,
    UserMessage,
    stream,
)

CONTEXT = Context(messages=[UserMessage(content="hi")])
SHORT = 0.2  # seconds for the idle and total timeouts: the server holds the body forever


def _options(**overrides: Any) -> StreamOptions:
    return StreamOptions(api_key="sk-local-0123456789", max_retries=0, **overrides)


def _is_text(event: object) -> bool:
    return isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta)


async def _by_aclose(model: Model) -> AssistantMessage:
    s = stream(model, CONTEXT, _options())
    async for event in s:
        if _is_text(event):
            break
    await s.aclose()
    return s.message


async def _by_leaving_async_with(model: Model) -> AssistantMessage:
    async with stream(model, CONTEXT, _options()) as s:
        async for event in s:
            if _is_text(event):
                break
    return s.message


async def _by_options_cancel(model: Model) -> AssistantMessage:
    cancel = anyio.Event()
    async with stream(model, CONTEXT, _options(cancel=cancel)) as s:
        async for event in s:
            if _is_text(event):
                cancel.set()  # the next read is blocked on the socket, then shut down
    return s.message


async def _by_scope_between_events(model: Model) -> AssistantMessage:
    async with stream(model, CONTEXT, _options()) as s:
        with anyio.CancelScope() as scope:
            async for event in s:
                if _is_text(event):
                    scope.cancel()
    return s.message


async def _by_scope_in_a_read(model: Model) -> AssistantMessage:
    async with stream(model, CONTEXT, _options()) as s:
        with anyio.move_on_after(SHORT):
            async for _ in s:
                pass
    return s.message


async def _by_total_timeout(model: Model) -> AssistantMessage:
    async with stream(model, CONTEXT, _options(total_timeout=SHORT)) as s:
        return await s.result()


async def _by_idle_timeout(model: Model) -> AssistantMessage:
    async with stream(model, CONTEXT, _options(idle_timeout=SHORT)) as s:
        return await s.result()


async def _by_abandoning(model: Model) -> AssistantMessage:
    """`async for` left early with neither `async with` nor `aclose()`: the stream is
    dropped mid-body."""
    s = stream(model, CONTEXT, _options())
    async for event in s:
        if _is_text(event):
            break
    message = s.message
    del s
    gc.collect()
    return message


WAYS: dict[str, Callable[[Model], Awaitable[AssistantMessage]]] = {
    "aclose": _by_aclose,
    "leaving async with": _by_leaving_async_with,
    "options.cancel": _by_options_cancel,
    "cancel scope between events": _by_scope_between_events,
    "cancel scope in a read": _by_scope_in_a_read,
    "total_timeout": _by_total_timeout,
    "idle_timeout": _by_idle_timeout,
    "abandoned": _by_abandoning,
}


def _gzipped_head_then_hold(conn: Connection) -> None:
    """The head of the answer gzip-compressed (decoded by stream-core a piece at a time),
    then nothing."""
    z = zlib.compressobj(wbits=31)
    body = z.compress(b"".join(EVENTS[:3])) + z.flush(zlib.Z_SYNC_FLUSH)
    if conn.send(HEAD + b"content-encoding: gzip\r\n\r\n" + chunk(body)):
        conn.hold()


def _error_body_past_its_cap(conn: Connection) -> None:
    """A 500 whose body is more than the 64 KB an error body is read up to, then nothing."""
    head = (
        b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    if conn.send(head + chunk(b"x" * 100_000)):
        conn.hold()


def _gzipped_error_body_past_its_cap(conn: Connection) -> None:
    """A gzip 500 of 62 KB on the wire (one read) that inflates to 64 MB: read (decoded) up to the
    cap; what was received is not inflated on when the body is closed."""
    head = (
        b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n"
        b"content-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    if conn.send(head + chunk(_INFLATING)):
        conn.hold()


_z = zlib.compressobj(9, zlib.DEFLATED, 31)
_INFLATING = _z.compress(b"x" * 64_000_000) + _z.flush(zlib.Z_SYNC_FLUSH)
CALLS = 40


async def _calls(backend: str) -> list[tuple[str, AssistantMessage]]:
    done: list[tuple[str, AssistantMessage]] = []
    with loopback(head_then_hold) as plain:
        for i in range(CALLS - 12):
            name = list(WAYS)[i % len(WAYS)]
            with anyio.fail_after(GUARD):
                done.append((name, await WAYS[name](plain.model())))
    with loopback(_gzipped_head_then_hold) as gzipped:
        for _ in range(4):
            with anyio.fail_after(GUARD):
                done.append(("gzip aclose", await _by_aclose(gzipped.model())))
    with loopback(_error_body_past_its_cap) as failing:
        for _ in range(4):
            with anyio.fail_after(GUARD):
                done.append(("error body", await _by_total_timeout(failing.model())))
    with loopback(_gzipped_error_body_past_its_cap) as failing:
        for _ in range(4):
            with anyio.fail_after(GUARD):
                done.append(("error body", await _by_total_timeout(failing.model())))
    for _ in range(3):
        gc.collect()
        await anyio.sleep(0)  # let the event loop run any finalizer the GC scheduled
    return done


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_closing_mid_body_leaves_no_generator_to_the_gc(backend: str) -> None:
    unraisable: list[Any] = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            done = anyio.run(_calls, backend, backend=backend)
            gc.collect()
    finally:
        sys.unraisablehook = old_hook

    assert len(done) == CALLS
    for way, message in done:
        if way == "abandoned":
            continue  # nobody ended it: nothing to say about its end
        assert message.stop_reason in ("aborted", "error"), way
        if way != "error body":
            assert message.text() == "ab", way  # what arrived is kept
    assert {m.error.kind for w, m in done if w == "error body" and m.error} == {"server"}
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []
    assert [repr(u.exc_value) for u in unraisable] == []
