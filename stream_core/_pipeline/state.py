"""The call's state: what every stage of `AssistantStream` reads and writes, and the waits
any of them may be interrupted in.

`AssistantStream` (`stream`) is one object per call, built from one stage per module on
this state: the request step (`request`, run in `__init__`), the HTTP step (`http`: send,
status errors, retries), the body's reads and the pump (`stream`), and the end (`finish`).
Each stage is a class with no slots of its own over `CallState`, which holds the slots,
so a stream is still one compact object.
"""

from __future__ import annotations

import math
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx

from .._decoding.body import close_body
from .._decoding.sse import Decoder
from .._errors import StreamFailure
from .._events import AssistantStreamEvent
from .._models import Model
from .._options import StreamOptions
from .._output import OutputSpec
from .._transport import _Socket
from .._types import AssistantMessage, Context, StreamError
from .._wire import Translator, WireAPI
from .assembler import Assembler

if TYPE_CHECKING:
    from .._limits.limiter import Ticket
    from .._otel import ChatSpan

__all__ = ["CallState"]

T = TypeVar("T")

# States of the pump.
_START, _CONNECT, _READ, _DONE = range(4)
_NONE: Any = object()
"""No whole (unstreamed) answer is waiting to be read."""

_forks = 0
"""How many `fork()`s this process is down from the one it started as."""


def _count_fork() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


class _Aborted(Exception):
    """`options.cancel` was set."""


class _Expired(Exception):
    """An `_interruptible` await reached its deadline."""


def _aborted() -> StreamError:
    return StreamError(kind="aborted", message="cancelled by options.cancel")


def _close_awaitable(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


class CallState:
    """The slots of one call, and what every stage shares: the waits `options.cancel` and
    `total_timeout` interrupt, closing the response, starting the message over."""

    # A gateway holds thousands at once: slots keep each one's state out of a per-instance
    # dict (1.3 KB a stream). `__dict__` stays, made only when used, so a plugin's subclass
    # without slots keeps this layout (`stream.__class__ = Subclass` works).
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_asm",
        "_attempt",
        "_capped",
        "_chunks",
        "_client",
        "_context",
        "_deadline",
        "_fork",
        "_decoder",
        "_framed",
        "_head",
        "_held_back",
        "_limit_key",
        "_loop",
        "_model",
        "_no_key",
        "_on_end",
        "_options",
        "_output",
        "_pass_over",
        "_pricing",
        "_queue",
        "_request",
        "_response",
        "_scope",
        "_secrets",
        "_server_tools",
        "_socket",
        "_span",
        "_started",
        "_state",
        "_stop_watch",
        "_ticket",
        "_translate",
        "_unframed",
        "_whole",
        "_wire",
        "message",
    )

    # What every stage reads and writes (set in `AssistantStream.__init__`).
    _wire: WireAPI
    _output: OutputSpec | None
    _model: Model
    _context: Context
    _options: StreamOptions
    _queue: deque[AssistantStreamEvent]
    message: AssistantMessage
    _on_end: Callable[[AssistantMessage], None] | None
    _pricing: Any
    _asm: Assembler
    _state: int
    _client: httpx.AsyncClient | None
    _response: httpx.Response | None
    _chunks: Any
    _loop: object
    """The event loop (or trio run) the body is read on."""
    _decoder: Decoder
    _capped: bool
    _unframed: int
    """Bytes read since the last frame, for a decoder that does not cap itself."""
    _translate: Translator | None
    _secrets: tuple[str, ...]
    _no_key: StreamError | None
    """A missing API key or credential: the environment, not the code, so it is the
    first event."""
    _attempt: int
    _whole: Any
    _head: bytes
    """The body's first bytes, kept until the decoder makes a first event of them: a
    body that ends without one names them in its error."""
    _framed: bool
    _scope: anyio.CancelScope | None
    """The scope of the await in progress that `options.cancel` may interrupt."""
    _socket: _Socket | None
    """The response's own socket, when its reads honour the transport's read timeout."""
    _stop_watch: Callable[[], object] | None
    _deadline: float | None
    """`options.total_timeout` as a time on the event loop's clock, once started."""
    _started: float | None
    _span: ChatSpan | None
    _fork: int
    """The process's fork count when opened: a child iterating it ends it at once."""
    _request: httpx.Request | None
    _server_tools: bool
    """The request asks for vendor-run tools (`request.asks_server_tools`)."""
    _ticket: Ticket | None
    """The limiter's admission of the attempt in progress (`admission`), until settled."""
    _limit_key: str | None
    _pass_over: bool
    """A `Route`'s attempt while another deployment is ready: never waits for its limit."""
    _held_back: bool
    """The limiter passed this attempt over (`_pass_over`): it ended unsent."""

    def _cancel_requested(self) -> bool:
        cancel = self._options.cancel
        return cancel is not None and cancel.is_set()

    def _overdue(self) -> bool:
        deadline = self._deadline
        return deadline is not None and anyio.current_time() >= deadline

    def _total_timeout_error(self) -> StreamError:
        # Not retryable: the time the caller allowed for the whole call is spent.
        return StreamError(
            kind="timeout",
            message=f"the call took longer than total_timeout={self._options.total_timeout}s",
        )

    async def _interruptible(self, awaitable: Awaitable[T], timeout: float | None) -> T:
        """Await inside a scope that `options.cancel` can cancel, with an optional deadline.

        Raises `_Aborted` when cancelled by `options.cancel`, `_Expired` at the deadline,
        `StreamFailure` (kind `timeout`) when `options.total_timeout` passes first; a
        cancel of the caller's own scope propagates. No task group: errors come out as
        they are, never wrapped in an exception group.
        """
        if self._cancel_requested():
            _close_awaitable(awaitable)
            raise _Aborted
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        total = self._deadline if self._state != _DONE else None
        with anyio.CancelScope(
            deadline=deadline if total is None else min(deadline, total)
        ) as scope:
            self._scope = scope
            try:
                return await awaitable
            finally:
                self._scope = None
        if self._cancel_requested():
            raise _Aborted
        if total is not None and anyio.current_time() >= total:
            raise StreamFailure(self._total_timeout_error())
        raise _Expired

    async def _watch(self) -> None:
        """The one watcher per stream: wait for `options.cancel` or the `total_timeout`
        deadline, then interrupt the await in progress at once (its scope, or the socket a
        scope-free read is blocked on)."""
        cancel = self._options.cancel
        deadline = self._deadline
        with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
            if cancel is not None:
                await cancel.wait()
            else:
                await anyio.sleep_forever()
        scope, sock = self._scope, self._socket
        if scope is not None:
            scope.cancel()
        elif sock is not None:
            # The blocked read wakes with end-of-file; the pump sees the event (or the
            # deadline) and ends the stream.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    async def _close_response(self) -> None:
        response, chunks = self._response, self._chunks
        if response is None and chunks is None:
            return
        self._response = self._chunks = None
        self._socket = None
        await close_body(response, chunks)

    def _reset_message(self) -> None:
        m = self.message
        m.content.clear()
        m.usage = type(m.usage)()
        m.raw_stop_reason = None
        m.response_id = None
        m.response_model = None
        self._queue.clear()
        self._asm = Assembler(
            m, self._model, self._wire.stop_reasons, self._queue, self._pricing, self._output
        )
        self._asm.secrets = self._secrets
        self._decoder = self._new_decoder()
        self._unframed = 0
        self._translate = None
        self._whole = _NONE
        self._head = b""
        self._framed = False

    def _new_decoder(self) -> Decoder:
        """The wire's decoder with `max_event_bytes` set in it, when it takes one."""
        decoder = self._wire.decoder()
        self._capped = hasattr(decoder, "max_event_bytes")
        if self._capped:
            # (AWS frames stay within their format's 16 MiB whatever this says.)
            decoder.max_event_bytes = self._options.max_event_bytes  # type: ignore[attr-defined]
        return decoder

    async def _finish(self, error: StreamError | None) -> None:
        """End the stream (`finish.Finishing`)."""
        raise NotImplementedError

    async def _settle(self, error: StreamError | None) -> None:
        """Settle the attempt's admission (`admission.Admission`)."""
        raise NotImplementedError
