"""`AssistantStream`: one call's life, from the request to `message_end`.

    stream() ── WireAPI.open: validate (raise now) ── AssistantStream         _wire
    __anext__ ─ message_start ─ request (retries) ─ chunk ─ decode ─ translate ─ events
                                │                  └─ idle: socket read timeout
                                │                     cancel: one watcher per stream
                                ├─ the client, the response's socket          _transport
                                └─ error body and headers -> error text       _error_text

The rooms, one per stage (each a slot-free class over `state.CallState`):
- `_wire`: what a provider supplies (`WireAPI`, `WireRequest`, `Translator`, `parse_json`);
  `checks`: what a call raises from, before any I/O.
- `request`: the request step, run in `__init__` (endpoint, key, payload, headers, body).
- `http`: connect, send, status and redirect errors, unstreamed bodies, retries.
- `stream` (here): the public surface, the pump and the body's reads; the first-byte and
  idle timeouts and `options.cancel` are enforced here and in `state`'s waits.
- `finish`: the one `_finish` (which hands the rest of a finished body to
  `_transport.drain_later`).
- `_transport`, `_decoding.body`: the client (one shared keep-alive client per event
  loop), the detached tasks, the socket the idle timeout and cancel act on, the body.
- `_error_text`: where error text is made from vendor bytes (error bodies, proxy pages) and
  headers (request id, Retry-After).

Everything after `stream()` returns is encoded in events; nothing raises. The stream is a
class, not a generator, so no cancel scope ever spans a `yield` (anyio's rule). Decoding,
translation and assembly are synchronous: the only await per network chunk is the read.

Timeouts and cancel cost nothing per chunk on a real connection (see `_read_chunk`): the
idle timeout is the transport's own per-read socket timeout, and `options.cancel` is
watched by one detached task per stream that shuts the socket down when the event is set.
Bodies that do not come from a socket (mock or ASGI transports, HTTP/2 multiplexing) are
read inside one cancel scope per read instead. Without an injected client, calls share one
keep-alive client per event loop (`_transport.shared_client`).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

import anyio
import httpx

from .._cost import cost_context
from .._decoding.sse import FramingError
from .._error_text import (
    _snippet,
    _unreadable,
)
from .._errors import ProtocolError, StreamFailure, redact
from .._events import AssistantStreamEvent, MessageStart
from .._models import Model
from .._options import StreamOptions
from .._output import OutputSpec
from .._transport import (
    close_soon,
)
from .._types import AssistantMessage, Context, StreamError
from .._wire import WireAPI, bind_stream
from . import state as _call
from .assembler import Assembler
from .finish import Finishing, _otel
from .http import HttpStep
from .request import prepare_request
from .state import _CONNECT, _DONE, _NONE, _READ, _START, _Aborted, _aborted, _Expired

if TYPE_CHECKING:
    pass

__all__ = ["AssistantStream"]

logger = logging.getLogger("stream_core")
T = TypeVar("T")


class AssistantStream(HttpStep, Finishing):
    """Async iterator of events; `await result()` gives the final message.

    Use it as `async with`: leaving the block closes the HTTP response and ends the message
    as `aborted` if it was still streaming.
    """

    __slots__ = ()

    def __init__(
        self,
        wire: WireAPI,
        model: Model,
        context: Context,
        options: StreamOptions,
        output: OutputSpec | None = None,
    ) -> None:
        self._wire = wire
        self._output = output
        self._model = model
        self._context = context
        self._options = options
        self._queue = deque()
        self.message = AssistantMessage(api=wire.api, provider=model.provider, model=model.id)
        self._pricing = cost_context(model, options)
        self._asm = Assembler(
            self.message, model, wire.stop_reasons, self._queue, self._pricing, output
        )
        self._state = _START
        self._client = None
        self._response = None
        self._chunks = None
        self._loop = None
        self._decoder = self._new_decoder()
        self._unframed = 0
        self._translate = None
        self._secrets = ()
        self._no_key = None
        self._attempt = 0
        self._whole = _NONE
        self._head = b""
        self._framed = False
        self._scope = None
        self._socket = None
        self._stop_watch = None
        self._deadline = None
        self._started = None
        self._span = None
        self._fork = _call._forks
        # Called with the final message just before its `message_end` is queued: a
        # `Route` records its attempt there, with no wrapper around every event.
        self._on_end = None
        self._ticket = None
        self._limit_key = None
        self._pass_over = False
        self._held_back = False
        # Built now, inside `stream()`: a bad context, option or payload hook raises here,
        # before any I/O (CONTRACT 1). What the environment lacks (a key, credentials, a
        # project) is not the code's fault: it becomes the stream's first event instead.
        self._check_budget()
        prepared = prepare_request(wire, model, context, options)
        self._request = prepared.request
        self._server_tools = prepared.server_tools
        self._secrets = prepared.secrets
        self._no_key = prepared.failure
        self._asm.secrets = self._secrets

    def __del__(self) -> None:
        # Dropped mid-body without `aclose()` (an `async for` left early outside `async
        # with`): the body is closed on the event loop rather than by the GC.
        response, chunks = getattr(self, "_response", None), getattr(self, "_chunks", None)
        if response is not None or chunks is not None:
            self._response = self._chunks = None
            close_soon(response, chunks, self._loop)
        if getattr(self, "_ticket", None) is not None:
            # Its limiter slot too, or a key whose concurrency a 429 bounded would fill
            # with streams nobody reads and wait forever.
            self._abandon_ticket()

    def __repr__(self) -> str:
        states = ("new", "connecting", "streaming", "done")
        return f"<AssistantStream {self._wire.api} {self._model.id} {states[self._state]}>"

    # --- public surface -----------------------------------------------------------------

    def __aiter__(self) -> AssistantStream:
        return self

    async def __anext__(self) -> AssistantStreamEvent:
        queue = self._queue
        while not queue:
            if self._state == _DONE:
                raise StopAsyncIteration
            await self._pump()
        return queue.popleft()

    async def result(self) -> AssistantMessage:
        """Read the rest of the stream and return the final message."""
        async for _ in self:
            pass
        return self.message

    async def aclose(self) -> None:
        """Stop now: close the response; the message ends `aborted` if it was unfinished."""
        if self._state != _DONE:
            await self._finish(StreamError(kind="aborted", message="stream closed by the caller"))

    async def __aenter__(self) -> AssistantStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- the pump -----------------------------------------------------------------------

    async def _pump(self) -> None:
        """Advance by one step, putting zero or more events on the queue."""
        if self._state == _START:
            self._state = _CONNECT
            self._queue.append(MessageStart(self.message))
            self._started = time.perf_counter()
            total = self._options.total_timeout
            if total is not None:
                self._deadline = anyio.current_time() + total
            otel = _otel()
            if otel is not None:
                url = self._request.url if self._request is not None else None
                self._span = otel.start_span(self._model, self._options, url)
            return
        if self._fork != _call._forks:
            await self._orphaned()
            return
        try:
            # `_cancel_requested()` and `_overdue()` written out: this runs once per chunk.
            cancel = self._options.cancel
            if cancel is not None and cancel.is_set():
                raise _Aborted
            if self._deadline is not None and self._overdue():
                raise StreamFailure(self._total_timeout_error())
            if self._state == _CONNECT:
                await self._connect()
                self._state = _READ
            else:
                await self._read_chunk()
        except StreamFailure as failure:
            # A read that failed because the watcher shut the socket is an abort, not a
            # network error; connect-phase failures were already offered a retry.
            if self._cancel_requested():
                await self._finish(_aborted())
                return
            try:
                if self._state == _READ and await self._may_retry(failure.error):
                    return
            except _Aborted:
                await self._finish(_aborted())
                return
            except StreamFailure as late:  # total_timeout passed during the backoff
                await self._finish(late.error)
                return
            await self._finish(failure.error)
        except _Aborted:
            await self._finish(_aborted())
        except anyio.get_cancelled_exc_class():
            # The caller's own scope was cancelled: clean up, record, and let it propagate.
            with anyio.CancelScope(shield=True):
                await self._finish(StreamError(kind="aborted", message="cancelled"))
            raise
        except Exception as exc:  # a bug or an unforeseen payload: still an event, never a raise
            message = redact(f"{type(exc).__name__}: {exc}", self._secrets)
            logger.debug("stream failed: %s", redact(traceback.format_exc(), self._secrets))
            await self._finish(StreamError(kind="protocol", message=message))

    async def _read_chunk(self) -> None:
        if self._whole is not _NONE:
            obj, self._whole = self._whole, _NONE
            assert self._wire.parse_response is not None
            try:
                self._wire.parse_response(self._asm, obj)
            except StreamFailure:
                raise
            except Exception as exc:
                raise ProtocolError(_unreadable("non-streamed answer", exc)) from None
            if not self._asm.finished:
                raise ProtocolError("the non-streamed answer was incomplete")
            await self._finish(None)
            return
        # The read is the one await per chunk, so it carries no cancel scope of its own when
        # the body comes from a socket: a cancel scope costs as much as the rest of the
        # event's work. There the idle timeout is the transport's read timeout (set in
        # `_send`) and `options.cancel` or `total_timeout` shuts the socket down (`_watch`).
        # Other bodies (mock transports, HTTP/2) get one scope per read with the idle deadline.
        idle = self._options.idle_timeout
        try:
            if self._socket is not None:
                chunk = await self._chunks.__anext__()
            else:
                chunk = await self._interruptible(self._chunks.__anext__(), idle)
        except StopAsyncIteration:
            chunk = None
            if self._overdue():  # the watcher shut the socket at the deadline
                raise StreamFailure(self._total_timeout_error()) from None
        except (_Expired, httpx.ReadTimeout):
            if self._overdue():
                raise StreamFailure(self._total_timeout_error()) from None
            raise StreamFailure(
                StreamError(
                    kind="timeout", retryable=True, message=f"no data for idle_timeout={idle}s"
                )
            ) from None
        except httpx.TransportError as exc:
            if self._overdue():
                raise StreamFailure(self._total_timeout_error()) from None
            raise StreamFailure(
                StreamError(
                    kind="network",
                    retryable=True,
                    message=f"stream ended before {self._wire.terminal_event} "
                    f"({self._net_text(exc)})",
                )
            ) from None
        translate = self._translate
        if translate is None:
            translate = self._translate = self._wire.translator(self._asm)
        failure: FramingError | None = None
        try:
            events = self._decoder.decode(chunk) if chunk is not None else self._decoder.flush()
        except FramingError as exc:
            events, failure = exc.frames, exc  # what came before the bad bytes still counts
        if not self._framed:
            if events:
                self._framed, self._head = True, b""
            elif chunk is not None and len(self._head) < _HEAD_LIMIT:
                self._head += chunk[: _HEAD_LIMIT - len(self._head)]
        asm = self._asm
        for sse in events:
            data = sse.data
            if not data:
                continue  # no data lines: nothing to dispatch (SSE spec), e.g. a lone `retry:`
            try:
                translate(sse.event, data)
            except StreamFailure:
                raise
            except Exception as exc:  # vendor JSON of a shape the translator did not expect
                raise ProtocolError(_unreadable(sse.event, exc)) from None
            if asm.finished:
                await self._finish(None)
                return
        if failure is not None:
            if not self._framed and self._head:
                # Bytes that never made one frame (a web page under a binary framing's
                # content type): show what came back.
                failure.error.message += f"; the body began {_snippet(self._head)}"
            raise failure
        if not self._capped and chunk is not None:
            # A plugin's decoder with no cap of its own: no frame in more than the cap's
            # worth of bytes ends the stream, so whatever it buffers stays bounded.
            self._unframed = 0 if events else self._unframed + len(chunk)
            cap = self._options.max_event_bytes
            if self._unframed > cap:
                raise ProtocolError(f"no event in {self._unframed} bytes (over {cap} bytes)")
        if chunk is None:
            if asm.complete_at_eof:
                await self._finish(None)
                return
            if not self._framed and _junk(self._head):
                # Junk under a stream's content type (a proxy's page, plain text, NULs):
                # what came back is shown, and asking again would get the same.
                raise ProtocolError(
                    f"the body never formed one event (expected {self._wire.terminal_event}): "
                    f"{_snippet(self._head)}"
                )
            raise StreamFailure(
                StreamError(
                    kind="network",
                    retryable=True,
                    message=f"stream ended before {self._wire.terminal_event}",
                )
            )


bind_stream(AssistantStream)


_HEAD_LIMIT = 512


def _junk(head: bytes) -> bool:
    """Whether a body's first bytes hold anything but white space and SSE comments (a
    keep-alive then a cut connection is a network failure, not junk)."""
    return any(line.strip() and not line.startswith(b":") for line in head.splitlines())
