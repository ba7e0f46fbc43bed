"""Blocking calls for scripts, notebooks and sync frameworks: `stream_sync`, `complete_sync`.

The async stream runs on one background asyncio loop (a daemon thread started on first
use) and the calling thread waits for it. That works the same from a thread without a loop
and from inside a running loop's thread (Jupyter), where `anyio.run` would fail. Sharing
one loop lets an `httpx.AsyncClient` passed in `options.client` keep its pooled
connections across sync calls. Each step runs in a copy of the caller's context variables,
so a span current in the caller's thread is the parent of the call's span.

The caller and the loop take turns, never run at once: one step runs the pipeline until it
has events (one network read), hands over every event that read produced, and the loop
then waits for the next step. Events therefore arrive as the vendor sends them, the live
`event.message` is never mutated while the caller looks at it, and the cost is one thread
hand-off per network read, not per event.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import os
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ._events import AssistantStreamEvent, MessageEnd
from ._models import Model
from ._options import StreamOptions
from ._pipeline import state as _call_state
from ._pipeline.stream import AssistantStream
from ._registry import stream
from ._types import AssistantMessage, Context

if TYPE_CHECKING:
    from ._routes.route import Route
    from ._routes.stream import RouteStream

__all__ = ["SyncStream", "complete_sync", "stream_sync"]

T = TypeVar("T")

_library_cvar: contextvars.ContextVar[str | None] | None
try:
    from sniffio import current_async_library_cvar as _library_cvar
except ImportError:  # pragma: no cover - anyio without sniffio
    _library_cvar = None

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: int | None = None
_exiting = False
_closing_tasks: set[asyncio.Task[None]] = set()
_WAKE_EVERY = 0.2
"""Seconds a waiting caller sleeps between checks for Ctrl-C."""


def _get_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(
                target=_run_loop, args=(loop, ready), name="stream-core-sync", daemon=True
            )
            thread.start()
            ready.wait()
            _loop = loop
        return _loop


def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    global _loop_thread
    _loop_thread = threading.get_ident()
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


@atexit.register
def _stop_loop() -> None:
    # While threads still run: a stream dropped later, during interpreter teardown, must
    # not wait on a daemon thread that finalization has frozen.
    global _exiting
    _exiting = True
    loop = _loop
    if loop is not None:
        loop.call_soon_threadsafe(loop.stop)


def _forget_loop() -> None:
    # A forked child has no copy of the loop thread: start a new one on first use.
    global _loop, _loop_thread, _lock
    _loop = _loop_thread = None
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

    def __init__(
        self, astream: AssistantStream | RouteStream, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._stream = astream
        self._loop = loop
        self._fork = _call_state._forks
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

    def __iter__(self) -> Iterator[AssistantStreamEvent]:
        # A generator of our own, so leaving a `for` loop early (break, return, an
        # exception) closes it at once and, through it, the stream: a plain iterator never
        # hears that its loop ended, and `result()` would then read the rest.
        try:
            while True:
                try:
                    event = self.__next__()
                except StopIteration:
                    return
                yield event
        finally:
            if not self._done:
                self.close()

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
        if self._done or _exiting:
            return  # finished, or the loop is stopping with the interpreter
        self._after_fork()
        if threading.get_ident() == _loop_thread:
            # Dropped on the loop thread itself (a cycle collected there): it must not wait
            # on itself, so the close runs as a task of its own.
            task = self._loop.create_task(self._aclose())
            _closing_tasks.add(task)
            task.add_done_callback(_closing_tasks.discard)
            return
        asyncio.run_coroutine_threadsafe(self._aclose(), self._loop).result()

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
            self.close()
        except Exception:
            pass

    # --- on the caller's thread -----------------------------------------------------------

    def _after_fork(self) -> None:
        """In a child after `fork()` the loop this stream ran on has no thread: waiting on
        it would hang. The child's own loop runs the steps; the stream then ends at once,
        saying it was opened before the fork."""
        if self._fork != _call_state._forks:
            self._fork = _call_state._forks
            self._loop = _get_loop()
            self._turn = self._scope = None

    def _call(self, step: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if threading.get_ident() == _loop_thread:
            raise RuntimeError("a sync call cannot run on stream-core's own loop; use stream()")
        self._after_fork()
        # The step runs in a copy of this thread's context variables (a current span, say),
        # minus the async library the caller may be running under (trio): ours is asyncio.
        context = contextvars.copy_context()
        if _library_cvar is not None:
            context.run(_library_cvar.set, None)
        try:
            future = context.run(asyncio.run_coroutine_threadsafe, step(), self._loop)
            while True:
                try:
                    # Waking now and then lets Ctrl-C through: a lock wait is not
                    # interrupted on Windows, nor by a signal that lands just before it.
                    return future.result(timeout=_WAKE_EVERY)
                except concurrent.futures.TimeoutError:
                    continue
        except BaseException:
            # KeyboardInterrupt while waiting, say: stop the read on the loop as well.
            self.close()
            raise

    # --- on the loop thread ---------------------------------------------------------------

    def _turn_lock(self) -> anyio.Lock:
        if self._turn is None:
            self._turn = anyio.Lock()
        return self._turn

    async def _advance(self, step: Callable[[], Coroutine[Any, Any, Any]]) -> None:
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
    model: Model | Route, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> SyncStream:
    """`stream(...)` for code without an event loop: a plain iterator of the same events.

    Programmer errors raise here, as with `stream`. `options.client`, if given, must be an
    `httpx.AsyncClient`; it runs on stream-core's background loop, so don't also use it
    from your own event loop. To abort from another thread, call `close()` (an
    `options.cancel` event belongs to one event loop and is not thread-safe).
    """
    astream = stream(model, context, options)
    return SyncStream(astream, _get_loop())


def complete_sync(
    model: Model | Route, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantMessage:
    """The final message of `stream_sync(...)`, in one blocking call."""
    with stream_sync(model, context, options) as s:
        return s.result()
