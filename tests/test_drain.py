"""After the terminal event the rest of the body is read in the background (issue 18 §4).

A proxy (LiteLLM) sends `data: [DONE]` and the chunked end some time after the vendor's
terminal event. The call ends at its terminal event, without waiting for that tail; the
connection goes back to the pool when the tail comes (the next call reuses it), and is
closed when the tail is large or never comes, or when the event loop ends first, with no
warning and nothing left hanging. Over a real loopback socket, asyncio and trio, with the
shared client and an injected one.
"""

from __future__ import annotations

import gc
import sys
import threading
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from threaded_loopback import (
    END,
    EVENTS,
    GUARD,
    HEAD,
    Connection,
    Loopback,
    chunk,
    loopback,
    whole_answer,
)

import stream_core._transport as transport
from stream_core import AssistantMessage, Context, StreamOptions, UserMessage, stream
from stream_core._transport import PoolTransport, shared_client

CONTEXT = Context(messages=[UserMessage(content="hi")])


def _answer_then(tail: bytes | None, release: threading.Event | None = None) -> Any:
    """The whole answer up to its terminal event; then, once `release` is set, `tail`
    and the chunked end (None: the body is never ended)."""
    sent = threading.Event()

    def answer(conn: Connection) -> None:
        if not conn.send(HEAD + b"\r\n" + b"".join(chunk(e) for e in EVENTS)):
            return
        if tail is None:
            conn.hold()
            return
        if release is not None and not release.wait(GUARD):
            return
        sent.set()
        conn.send(chunk(tail) + END)

    answer.sent = sent  # type: ignore[attr-defined]
    return answer


@asynccontextmanager
async def _client(kind: str) -> AsyncIterator[httpx.AsyncClient | None]:
    if kind == "shared":
        yield None
    else:
        async with httpx.AsyncClient() as client:
            yield client


async def _call(server: Loopback, client: httpx.AsyncClient | None) -> AssistantMessage:
    options = StreamOptions(api_key="sk-local-0123456789", max_retries=0, client=client)
    with anyio.fail_after(GUARD):  # a guard against hangs, not a timing assertion
        async with stream(server.model(), CONTEXT, options) as s:
            return await s.result()


async def _pooled_and_idle(client: httpx.AsyncClient | None) -> bool:
    """Wait (within the guard) for the pool to hold an idle connection."""
    transport = (client or shared_client())._transport
    # The shared client's transport spreads connections over several httpcore pools.
    pool = transport if isinstance(transport, PoolTransport) else transport._pool  # type: ignore[attr-defined]
    with anyio.move_on_after(GUARD):
        while not any(c.is_idle() for c in pool.connections):
            await anyio.sleep(0.01)
        return True
    return False


@pytest.mark.anyio
@pytest.mark.parametrize("client_kind", ["shared", "injected"])
async def test_a_late_tail_is_read_after_the_call_and_the_connection_reused(
    client_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails: behind LiteLLM (`data: [DONE]` well after `response.completed`) every
    call either waits for the tail or opens a new connection (a TLS handshake)."""
    # The tail is sent only after the call has returned, and the drain would wait for it
    # for an hour: a call that waited for its drain would never return (the guard trips).
    monkeypatch.setattr(transport, "_DRAIN_TIMEOUT", 3600.0)
    release = threading.Event()
    late = _answer_then(b"data: [DONE]\n\n", release)
    with loopback([late, whole_answer]) as server:
        async with _client(client_kind) as client:
            first = await _call(server, client)
            # The call ended at its terminal event: the server had not sent the tail yet.
            assert not late.sent.is_set()
            assert first.stop_reason == "stop" and first.text() == "ab"
            release.set()
            assert await _pooled_and_idle(client)
            second = await _call(server, client)
    assert second.stop_reason == "stop" and second.text() == "ab"
    assert [c.requests for c in server.connections] == [2]


@pytest.mark.anyio
@pytest.mark.parametrize("client_kind", ["shared", "injected"])
async def test_a_body_that_never_ends_is_closed_not_reused(
    client_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "_DRAIN_TIMEOUT", 0.2)
    with loopback([_answer_then(None), whole_answer]) as server:
        async with _client(client_kind) as client:
            first = await _call(server, client)  # returns, though the body never ends
            assert first.stop_reason == "stop" and first.text() == "ab"
            closed = server.connections[0].closed
            assert await anyio.to_thread.run_sync(closed.wait, GUARD)
            second = await _call(server, client)
    assert second.stop_reason == "stop"
    assert [c.requests for c in server.connections] == [1, 1]


@pytest.mark.anyio
async def test_a_large_tail_is_not_read_to_its_end() -> None:
    """More than the drain's byte limit after the terminal event: the connection is closed
    rather than read on."""
    tail = b": padding\n" * 20_000  # 200 KB of SSE comments
    with loopback([_answer_then(tail), whole_answer]) as server:
        first = await _call(server, None)
        assert first.stop_reason == "stop" and first.text() == "ab"
        closed = server.connections[0].closed
        assert await anyio.to_thread.run_sync(closed.wait, GUARD)
        second = await _call(server, None)
    assert second.stop_reason == "stop"
    assert [c.requests for c in server.connections] == [1, 1]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("client_kind", ["shared", "injected"])
def test_a_drain_in_progress_ends_with_the_event_loop(
    backend: str, client_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop ends (or the injected client is closed) while a body is being drained: the
    connection is closed, nothing hangs, nothing warns."""
    monkeypatch.setattr(transport, "_DRAIN_TIMEOUT", 3600.0)  # only the loop's end stops it

    async def main(server: Loopback) -> AssistantMessage:
        async with _client(client_kind) as client:
            return await _call(server, client)

    unraisable: list[Any] = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        with warnings.catch_warnings(record=True) as caught, loopback(_answer_then(None)) as srv:
            warnings.simplefilter("always")
            message = anyio.run(main, srv, backend=backend)
            gc.collect()
            closed = srv.connections[0].closed.wait(GUARD)
    finally:
        sys.unraisablehook = old_hook
    assert message.stop_reason == "stop" and message.text() == "ab"
    assert closed
    assert [str(w.message) for w in caught] == []
    assert [repr(u.exc_value) for u in unraisable] == []
