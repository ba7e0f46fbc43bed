"""Blocking calls for scripts, notebooks and sync frameworks: `stream_sync`, `complete_sync`.

The async stream runs on one background event loop (asyncio, in a daemon thread started on
first use) and the calling thread waits on it through an anyio blocking portal. That works
the same from a thread without a loop and from inside a running loop's thread (Jupyter),
where `anyio.run` would fail. Sharing one loop lets an `httpx.AsyncClient` passed in
`options.client` keep its pooled connections across sync calls.

The caller and the loop take turns, never run at once: one portal call runs the pipeline
until it has events (one network read), hands over every event that read produced, and the
loop then waits for the next call. Events therefore arrive as the vendor sends them, the
live `event.message` is never mutated while the caller looks at it, and the cost is one
thread hand-off per network read, not per event.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from ._events import AssistantStreamEvent, MessageEnd
from ._models import Model
from ._options import StreamOptions
from ._registry import stream
from ._stream import AssistantStream
from ._types import AssistantMessage, Context

__all__ = ["SyncStream", "complete_sync", "stream_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: int | None = None
_closing_tasks: set[asyncio.Task[None]] = set()


def _get_portal() -> BlockingPortal:
    global _portal
    with _lock:
        if _portal is None:
            ready: Future[BlockingPortal] = Future()
            thread = threading.Thread(
                target=_run_loop, args=(ready,), name="stream-core-sync", daemon=True
            )
            thread.start()
            _portal = ready.result()
        return _portal


def _run_loop(ready: Future[BlockingPortal]) -> None:
    async def main() -> None:
        global _loop, _loop_thread
        _loop = asyncio.get_running_loop()
        _loop_thread = threading.get_ident()
        async with BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    try:
        anyio.run(main, backend="asyncio")
    except BaseException as exc:  # pragma: no cover - the loop failed to start
        if not ready.done():
            ready.set_exception(exc)


@atexit.register
def _stop_loop() -> None:
    # While threads still run: a stream dropped later, during interpreter teardown, then
    # finds the portal stopped instead of waiting forever on a frozen daemon thread.
    global _portal
    with _lock:
        portal, _portal = _portal, None
    if portal is not None:
        try:
            portal.call(portal.stop, True)
        except RuntimeError:
            pass


def _forget_loop() -> None:
    # A forked child has no copy of the loop thread: start a new one on first use.
    global _portal, _loop, _loop_thread, _lock
    _portal = _loop = _loop_thread = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loop)


class SyncStream:
    """A plain iterator of the same events as `AssistantStream`; `result()` gives the final
    message. Use it as `with`: leaving the block (or `close()`, or dropping the iterator,
    e.g. by `break` out of `for ev in stream_sync(...)`) closes the HTTP response and ends
    the message `aborted` if it was still streaming. `close()` may be called from any
    thread, also while another thread waits in `next()`.
    """

    def __init__(self, astream: AssistantStream, portal: BlockingPortal) -> None:
        self._stream = astream
        self._portal = portal
        self._batch: deque[AssistantStreamEvent] = deque()
        self._done = False
        self._closed = False
        # Touched only on the loop thread:
        self._scope: anyio.CancelScope | None = None
        self._turn: anyio.Lock | None = None
        self._closing = False

    def __repr__(self) -> str:
        return f"<SyncStream of {self._stream!r}>"

    @property
    def message(self) -> AssistantMessage:
        """The live message (final once `message_end` was returned)."""
        return self._stream.message

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> AssistantStreamEvent:
        batch = self._batch
        if not batch:
            if self._done:
                raise StopIteration
            batch.extend(self._call(self._next_batch))
            if not batch:
                self._done = True
                raise StopIteration
            if isinstance(batch[-1], MessageEnd):
                self._done = True
        return batch.popleft()

    def result(self) -> AssistantMessage:
        """Read the rest of the stream and return the final message."""
        if not self._done:
            self._call(self._drain)
            self._batch.clear()
            self._done = True
        return self._stream.message

    def close(self) -> None:
        """Stop now: close the response; the message ends `aborted` if it was unfinished."""
        if self._closed:
            return
        self._closed = True
        if self._done:
            return
        try:
            self._portal.call(self._aclose)
        except RuntimeError:
            pass  # the loop is gone (interpreter exit): nothing left to close

    def __enter__(self) -> SyncStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._closed or self._done:
                return
            loop = _loop
            if loop is not None and threading.get_ident() == _loop_thread:
                # Collected on the loop thread itself, which must not block on itself.
                self._closed = True
                task = loop.create_task(self._aclose())
                _closing_tasks.add(task)
                task.add_done_callback(_closing_tasks.discard)
            else:
                self.close()
        except Exception:
            pass

    # --- on the caller's thread -----------------------------------------------------------

    def _call(self, step: Callable[[], Awaitable[T]]) -> T:
        try:
            return self._portal.call(step)
        except BaseException:
            # KeyboardInterrupt while waiting, say: stop the read on the loop as well.
            self.close()
            raise

    # --- on the loop thread ---------------------------------------------------------------

    def _turn_lock(self) -> anyio.Lock:
        if self._turn is None:
            self._turn = anyio.Lock()
        return self._turn

    async def _advance(self, step: Callable[[], Awaitable[Any]]) -> None:
        """Run `step` unless or until `close()` cancels it (the stream then ends itself)."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._closing:
                scope.cancel()
            try:
                await step()
            finally:
                self._scope = None

    async def _next_batch(self) -> list[AssistantStreamEvent]:
        async with self._turn_lock():
            s = self._stream
            batch: list[AssistantStreamEvent] = []

            async def first() -> None:
                try:
                    batch.append(await s.__anext__())
                except StopAsyncIteration:
                    pass

            await self._advance(first)
            # Whatever the same read produced (a plugin stream may have no queue).
            queued: deque[AssistantStreamEvent] | None = getattr(s, "_queue", None)
            if queued:
                batch.extend(queued)
                queued.clear()
            return batch

    async def _drain(self) -> None:
        async with self._turn_lock():
            await self._advance(self._stream.result)
            queued: deque[AssistantStreamEvent] | None = getattr(self._stream, "_queue", None)
            if queued:
                queued.clear()

    async def _aclose(self) -> None:
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        async with self._turn_lock():
            await self._stream.aclose()


def stream_sync(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> SyncStream:
    """`stream(...)` for code without an event loop: a plain iterator of the same events.

    Programmer errors raise here, as with `stream`. `options.client`, if given, must be an
    `httpx.AsyncClient`; it runs on stream-core's background loop, so don't also use it
    from your own event loop. To abort from another thread, call `close()` (an
    `options.cancel` event belongs to one event loop and is not thread-safe).
    """
    astream = stream(model, context, options)
    return SyncStream(astream, _get_portal())


def complete_sync(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantMessage:
    """The final message of `stream_sync(...)`, in one blocking call."""
    with stream_sync(model, context, options) as s:
        return s.result()
