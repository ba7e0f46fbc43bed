"""`AssistantStream`: one call's life, from the request to `message_end`.

    stream() ── WireAPI.open: validate (raise now) ── AssistantStream         _wire
    __anext__ ─ message_start ─ request (retries) ─ chunk ─ decode ─ translate ─ events
                                │                  └─ idle: socket read timeout
                                │                     cancel: one watcher per stream
                                ├─ the client, the response's socket          _transport
                                └─ error body and headers -> error text       _error_text

The rooms:
- `_wire`: what a provider supplies (`WireAPI`, `WireRequest`, `Translator`, `parse_json`)
  and the checks a call raises from, before any I/O.
- `_stream` (here): the state machine. Retries, the first-byte and idle timeouts and
  `options.cancel` are enforced here, as is the one `_finish` (which hands the rest of a
  finished body to `_transport.drain_later`).
- `_transport`: where the client lives (one shared keep-alive client per event loop), the
  detached tasks, and the response socket that the idle timeout and cancel act on.
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

import importlib.util
import json
import logging
import math
import os
import random
import re
import socket
import time
import traceback
import typing
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx
from pydantic_core import from_json

from ._assembler import Assembler
from ._body import body_chunks, close_body
from ._checks import placeholder_problem
from ._cost import cost_context
from ._error_text import (
    _ERROR_BODY_LIMIT,
    _snippet,
    _unreadable,
    request_id,
    retry_after_seconds,
    vendor_error_text,
)
from ._errors import ProtocolError, StreamFailure, error_from_status, redact, secrets_in
from ._events import AssistantStreamEvent, MessageEnd, MessageStart
from ._handoff import sanitize_surrogates
from ._models import Model
from ._options import StreamOptions
from ._output import OutputSpec, read_output
from ._sse import Decoder, FramingError
from ._transport import (
    _loop_key,
    _own_socket,
    _Socket,
    _spawn_detached,
    close_soon,
    connections_in_use,
    drain_later,
    shared_client_async,
)
from ._types import AssistantMessage, Context, StreamError
from ._wire import Translator, WireAPI, _endpoint, api_key_from_env, bind_stream

if TYPE_CHECKING:
    from ._otel import ChatSpan

__all__ = ["AssistantStream"]

logger = logging.getLogger("stream_core")
T = TypeVar("T")


# States of the pump.
_START, _CONNECT, _READ, _DONE = range(4)
_forks = 0
"""How many `fork()`s this process is down from the one it started as."""


def _count_fork() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)
_INLINE_OUTPUT = 64 * 1024
"""A JSON-Schema answer up to this many characters is read on the loop (microseconds);
a longer one, or any answer validated by a class, in a worker thread."""


class _Aborted(Exception):
    pass


class AssistantStream:
    """Async iterator of events; `await result()` gives the final message.

    Use it as `async with`: leaving the block closes the HTTP response and ends the message
    as `aborted` if it was still streaming.
    """

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
        "_loop",
        "_model",
        "_no_key",
        "_options",
        "_output",
        "_pricing",
        "_queue",
        "_request",
        "_response",
        "_scope",
        "_secrets",
        "_socket",
        "_span",
        "_started",
        "_state",
        "_stop_watch",
        "_translate",
        "_unframed",
        "_whole",
        "_wire",
        "message",
    )

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
        self._queue: deque[AssistantStreamEvent] = deque()
        self.message = AssistantMessage(api=wire.api, provider=model.provider, model=model.id)
        self._pricing = cost_context(model, options)
        self._asm = Assembler(
            self.message, model, wire.stop_reasons, self._queue, self._pricing, output
        )
        self._state = _START
        self._client: httpx.AsyncClient | None = None
        self._response: httpx.Response | None = None
        self._chunks: Any = None
        self._loop: object = None
        """The event loop (or trio run) the body is read on."""
        self._decoder = self._new_decoder()
        self._unframed = 0
        """Bytes read since the last frame, for a decoder that does not cap itself."""
        self._translate: Translator | None = None
        self._secrets: tuple[str, ...] = ()
        self._no_key: StreamError | None = None
        """A missing API key or credential: the environment, not the code, so it is the
        first event."""
        self._attempt = 0
        self._whole: Any = _NONE
        self._head = b""
        """The body's first bytes, kept until the decoder makes a first event of them: a
        body that ends without one names them in its error."""
        self._framed = False
        self._scope: anyio.CancelScope | None = None
        """The scope of the await in progress that `options.cancel` may interrupt."""
        self._socket: _Socket | None = None
        """The response's own socket, when its reads honour the transport's read timeout."""
        self._stop_watch: Callable[[], object] | None = None
        self._deadline: float | None = None
        """`options.total_timeout` as a time on the event loop's clock, once started."""
        self._started: float | None = None
        self._span: ChatSpan | None = None
        self._fork = _forks
        """The process's fork count when opened: a child iterating it ends it at once."""
        # Built now, inside `stream()`: a bad context, option or payload hook raises here,
        # before any I/O (CONTRACT 1). What the environment lacks (a key, credentials, a
        # project) is not the code's fault: it becomes the stream's first event instead.
        self._request: httpx.Request | None = None
        try:
            self._request = self._build()
        except StreamFailure as failure:
            self._no_key = failure.error
        self._asm.secrets = self._secrets

    def __del__(self) -> None:
        # Dropped mid-body without `aclose()` (an `async for` left early outside `async
        # with`): the body is closed on the event loop rather than by the GC.
        response, chunks = getattr(self, "_response", None), getattr(self, "_chunks", None)
        if response is not None or chunks is not None:
            self._response = self._chunks = None
            close_soon(response, chunks, self._loop)

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
        if self._fork != _forks:
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

    async def _connect(self) -> None:
        if self._no_key is not None:
            raise StreamFailure(self._no_key)
        watched = self._options.cancel is not None or self._deadline is not None
        if watched and self._stop_watch is None:
            self._stop_watch = _spawn_detached(self._watch)
        fetch = self._wire.bearer_token
        request = self._request
        assert request is not None
        if fetch is not None and not self._secrets and "authorization" not in request.headers:
            # An OAuth token (Vertex AI's default credentials) is I/O: fetched here, once.
            token = await self._interruptible(fetch(self._model), None)
            if token:
                self._secrets += (token,)
                self._asm.secrets = self._secrets
                request.headers["authorization"] = f"Bearer {token}"
        opts = self._options
        while True:
            if self._client is None:
                self._client = opts.client or await self._shared_client()
            error = await self._send()
            if error is None:
                return
            if not await self._may_retry(error):
                raise StreamFailure(error)

    async def _shared_client(self) -> httpx.AsyncClient:
        """The shared client; one the environment makes impossible (a SOCKS proxy without
        `socksio`, a malformed `HTTPS_PROXY`) is the environment's failure, not the
        vendor's: reported like a missing key, before any I/O, not retried."""
        request = self._request
        assert request is not None
        try:
            return await shared_client_async(tls=request.url.scheme == "https" or _proxied())
        except Exception as exc:
            raise StreamFailure(_environment_error(exc)) from None

    def _build(self) -> httpx.Request:
        wire, opts = self._wire, self._options
        model = _endpoint(wire, self._model, opts)
        api_key = opts.api_key
        env = wire.api_key_env(model)
        if api_key is None and env:
            api_key = api_key_from_env(env)
        req = wire.build_request(model, self._context, opts)
        unfilled = placeholder_problem(req.url)
        if unfilled is not None:
            # The last check before a credential is attached: never to nobody's host.
            raise ValueError(
                f"model.base_url: the request would go to {req.url.split('?')[0][:120]!r}, "
                f"but {unfilled}; configure the endpoint (for Azure OpenAI: "
                "AZURE_OPENAI_RESOURCE_NAME or AZURE_OPENAI_BASE_URL) or pass "
                "StreamOptions(base_url=...)"
            )
        hooked = ""
        if opts.on_payload is not None:
            try:
                replaced = opts.on_payload(req.payload, model)
            except Exception as exc:
                raise ValueError(
                    f"StreamOptions.on_payload raised {type(exc).__name__}: {exc}"
                ) from exc
            if replaced is not None:
                if not isinstance(replaced, dict):
                    raise TypeError(
                        "StreamOptions.on_payload must return a dict or None, "
                        f"not {type(replaced).__name__}"
                    )
                req.payload = replaced
            hooked = " (after StreamOptions.on_payload)"
        headers = {
            # The request is built here, not by the client: its own defaults come first.
            **(opts.client.headers if opts.client is not None else {}),
            "accept": "text/event-stream",
            # Compressed SSE arrives all at once; ask for it plain.
            "accept-encoding": "identity",
            **req.headers,
            **(wire.auth_headers(model, api_key) if api_key else {}),
            **model.headers,
            **opts.headers,
        }
        # Every credential the request carries, however it was supplied (an injected
        # client's default headers included), is redacted from every error and log line
        # (CONTRACT 4).
        client_headers = opts.client.headers if opts.client is not None else {}
        self._secrets = secrets_in({**client_headers, **headers}, api_key)
        if api_key is None and not self._secrets and wire.key_required(model):
            where = f"set {env} or pass" if env else "pass"
            self._no_key = StreamError(
                kind="auth",
                message=f"no API key for {model.provider}: {where} StreamOptions(api_key=...)",
            )
        timeout = httpx.Timeout(
            connect=opts.connect_timeout, read=None, write=60.0, pool=opts.pool_timeout
        )
        # Serialized once, here, for every provider: lone surrogates (from a truncated
        # tool output, say) cannot be encoded as UTF-8 and are removed from all outbound
        # text, tool arguments and schemas included; NaN is not JSON and fails loudly.
        try:
            text = json.dumps(req.payload, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"request payload{hooked}: not JSON: {exc}") from None
        body = sanitize_surrogates(text)
        headers.setdefault("content-type", "application/json")
        request = httpx.Request(
            "POST",
            req.url,
            headers=headers,
            content=body.encode("utf-8"),
            extensions={"timeout": timeout.as_dict()},
        )
        if wire.sign is not None:
            self._secrets += wire.sign(request, model, opts, api_key)
        return request

    async def _send(self) -> StreamError | None:
        """Send the request; None on a 2xx response (kept open), else the error."""
        assert self._client is not None and self._request is not None
        first_byte = self._options.first_byte_timeout
        timeouts = self._request.extensions["timeout"]
        # Waiting for the headers is the first-byte timeout's job (the scope below); only
        # the body's reads get the transport's per-read timeout (see `_read_chunk`).
        timeouts["read"] = None
        try:
            # Never follow a redirect, whatever the client says: httpx strips only
            # `authorization` and `cookie` on a cross-origin hop, so `x-api-key` and the
            # like would go to whichever host the Location names (CONTRACT 4).
            response = await self._interruptible(
                self._client.send(self._request, stream=True, follow_redirects=False),
                first_byte,
            )
            rid = request_id(response.headers)
            self.message.request_id = redact(rid, self._secrets) if rid else rid
        except _Expired:
            return StreamError(
                kind="timeout",
                retryable=True,
                message=f"no response within first_byte_timeout={first_byte}s",
            )
        except httpx.PoolTimeout:
            return self._pool_full_error()
        except httpx.TimeoutException as exc:
            return StreamError(kind="timeout", retryable=True, message=self._net_text(exc))
        except httpx.TransportError as exc:
            return StreamError(kind="network", retryable=True, message=self._net_text(exc))
        if 300 <= response.status_code < 400:
            await response.aclose()
            return self._redirect_error(response)
        if response.status_code < 400:
            self._response = response
            self._loop = _loop_key()
            self._socket = _own_socket(response)
            # Raw bytes skip one async generator per chunk, which on a socket is one per
            # event. We ask for identity; a body compressed anyway is decoded a bounded
            # piece at a time (`body_chunks`), never a whole read at once by httpx.
            self._chunks = body_chunks(response)
            if self._socket is not None:
                # httpcore takes the read timeout from this dict when the body is first
                # read, i.e. after this point: a socket-level idle timeout, per read.
                timeouts["read"] = self._options.idle_timeout
            media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if media not in self._decoder.media_types:
                await self._read_unstreamed(media)
            return None
        # The error body is read up to its cap, counted after content decoding: a small
        # compressed body cannot inflate past it.
        buffer = bytearray()
        unread = ""
        chunks: Any = None
        try:
            chunks = body_chunks(response)
            async for part in chunks:
                buffer += part
                if len(buffer) > _ERROR_BODY_LIMIT:
                    break
        except ProtocolError as exc:
            unread = exc.error.message
        except httpx.HTTPError:
            pass
        finally:
            await close_body(response, chunks)
        error = self._http_error(response, bytes(buffer[:_ERROR_BODY_LIMIT]))
        if unread:
            error.message += f" ({unread})"
        return error

    async def _read_unstreamed(self, media: str) -> None:
        """A 2xx answer that did not say it is our stream: read it whole and decide.

        A complete JSON answer goes to `WireAPI.parse_response`; a body that decodes as
        our framing anyway (a server that mislabels its stream) is replayed as one chunk;
        anything else (a login page, plain text, an empty body) ends the stream `protocol`,
        with no retry: asking again gets the same page.
        """
        buffer = bytearray()
        async for part in self._chunks:
            buffer += part
            if len(buffer) > _UNSTREAMED_LIMIT:
                break
        await self._close_response()
        what = media or "no content type"
        if len(buffer) > _UNSTREAMED_LIMIT:
            raise ProtocolError(f"answer ({what}) over {_UNSTREAMED_LIMIT} bytes")
        # The body is parsed as it is, never copied whole: a copy would double the peak.
        start = _NON_SPACE.search(buffer)
        first = buffer[start.start() : start.start() + 1] if start else b""
        if self._wire.parse_response is not None and first in (b"{", b"["):
            try:
                obj = from_json(buffer, allow_inf_nan=False)
            except ValueError:
                raise ProtocolError(
                    f"unreadable JSON answer ({what}): {_snippet(bytes(buffer[:4096]))}"
                ) from None
            self._whole = obj
            self._chunks = _no_chunks()
            return
        body = bytes(buffer)
        del buffer
        if _frames_in(self._wire.decoder(), body):
            self._chunks = _one_chunk(body)
            return
        raise ProtocolError(
            f"expected a stream but got {what}"
            + (f": {_snippet(body)}" if body.strip() else " with an empty body")
        )

    def _http_error(self, response: httpx.Response, body: bytes) -> StreamError:
        vendor_type, text = vendor_error_text(body)
        status = response.status_code
        message = f"HTTP {status} from {self._where()}"
        if text:
            message += f": {text}"
        return error_from_status(
            status,
            redact(message, self._secrets),
            vendor_type=vendor_type,
            retry_after=retry_after_seconds(response.headers),
        )

    def _redirect_error(self, response: httpx.Response) -> StreamError:
        """A 3xx: reported, never followed (the credentials stay with the host they were
        meant for), and not retried: asking again gets the same redirect."""
        status = response.status_code
        location = " ".join(response.headers.get("location", "").split())[:500]
        where = f"redirected to {location}" if location else "a redirect with no Location"
        message = (
            f"HTTP {status} from {self._where()}: {where}; not followed, so the request's "
            "credentials never reach another address (set base_url to where the API is)"
        )
        return StreamError(
            kind="invalid_request",
            message=redact(message, self._secrets),
            status_code=status,
        )

    def _pool_full_error(self) -> StreamError:
        # Not retried: another attempt would wait in the same queue behind the same streams.
        assert self._client is not None and self._request is not None
        in_use = connections_in_use(self._client, self._request.url)
        return StreamError(
            kind="timeout",
            message=f"connection pool full: {'all' if in_use is None else in_use} in use "
            f"(no free connection within pool_timeout={self._options.pool_timeout}s)",
        )

    def _net_text(self, exc: Exception) -> str:
        text = str(exc) or type(exc).__name__
        return redact(f"{type(exc).__name__} on {self._where()}: {text}", self._secrets)

    def _where(self) -> str:
        """`POST https://host/path` of the request, for error texts: no query string (it may
        carry a key) and no user info."""
        request = self._request
        if request is None:
            return "the request"
        url = request.url
        host = f"[{url.host}]" if ":" in url.host else url.host  # IPv6
        port = f":{url.port}" if url.port is not None else ""
        return f"{request.method} {url.scheme}://{host}{port}{url.path}"

    async def _may_retry(self, error: StreamError) -> bool:
        """Sleep and reset for another attempt when the contract allows one."""
        opts = self._options
        if not error.retryable or self._asm.updated or self._attempt >= opts.max_retries:
            return False
        if error.retry_after is not None and error.retry_after > opts.max_retry_delay:
            return False
        delay = error.retry_after
        if delay is None:
            delay = opts.retry_backoff * (2**self._attempt) * (0.5 + random.random() / 2)
        delay = min(delay, opts.max_retry_delay)
        if self._deadline is not None and anyio.current_time() + delay >= self._deadline:
            return False  # no time left for another attempt: this error is the answer
        self._attempt += 1
        logger.info("%s: retrying after %.2fs (%s)", self._wire.api, delay, error.kind)
        await self._close_response()
        try:
            await self._interruptible(anyio.sleep(delay), None)
        except _Expired:  # pragma: no cover - no deadline was set
            pass
        if self._state == _READ:
            # A failure before any update (e.g. an overloaded event): start over cleanly.
            self._reset_message()
            self._state = _CONNECT
        return True

    def _new_decoder(self) -> Decoder:
        """The wire's decoder with `max_event_bytes` set in it, when it takes one."""
        decoder = self._wire.decoder()
        self._capped = hasattr(decoder, "max_event_bytes")
        if self._capped:
            # (AWS frames stay within their format's 16 MiB whatever this says.)
            decoder.max_event_bytes = self._options.max_event_bytes  # type: ignore[attr-defined]
        return decoder

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

    async def _orphaned(self) -> None:
        """Iterated in a child after `fork()`: the response, its socket and the watcher
        belong to the parent's event loop; they are dropped, never touched (a read would
        wait forever, a close could end the parent's stream)."""
        self._response = self._chunks = None
        self._socket = None
        self._stop_watch = None
        self._client = None
        await self._finish(
            StreamError(
                kind="invalid_request",
                message="this stream was opened before fork(), in another process; a stream "
                "cannot cross a fork: open a new one in this process",
            )
        )

    async def _close_response(self) -> None:
        response, chunks = self._response, self._chunks
        if response is None and chunks is None:
            return
        self._response = self._chunks = None
        self._socket = None
        await close_body(response, chunks)

    async def _read_output(self) -> None:
        """The structured answer, read in a worker thread (CPU work, and the caller's class
        may run validators of its own): no event loop, nor the sync facade's shared one,
        waits on it, and `total_timeout` still ends the call, its text kept."""
        asm = self._asm
        text = asm.output_text()
        if text is None or self._output is None:
            return
        spec = self._output
        if len(text) <= _INLINE_OUTPUT and spec.model_class is None:
            asm.set_output(*read_output(text, spec))
            return
        limit = math.inf if self._deadline is None else self._deadline - anyio.current_time()
        found: tuple[Any, str | None] | None = None
        with anyio.move_on_after(max(limit, 0)):
            # Abandoned at the deadline: the thread finishes alone and its answer is dropped.
            found = await anyio.to_thread.run_sync(read_output, text, spec, abandon_on_cancel=True)
        if found is None:
            self.message.stop_reason = "error"
            self.message.error = self._total_timeout_error()
        else:
            asm.set_output(*found)

    async def _finish(self, error: StreamError | None) -> None:
        if self._state == _DONE:
            return
        if self._state == _START:
            # Closed before the first read: the sequence still opens with message_start.
            self._queue.append(MessageStart(self.message))
        self._state = _DONE
        if self._stop_watch is not None:
            self._stop_watch()
            self._stop_watch = None
        drained = None
        if error is None and self._socket is not None and self._response is not None:
            # The rest of the body is read in a task of its own, so the connection can go
            # back to the pool without this call waiting for a slow or endless tail.
            drained = drain_later(self._response, self._chunks)
            if drained is not None:
                self._response = self._chunks = None
                self._socket = None
        await self._close_response()
        # The shared client stays open for the next call on this event loop.
        self._client = None
        m = self.message
        if self._secrets:
            # One place for every error text, vendor words included (an error event or a
            # quoted malformed line may echo the key), and for the vendor's short strings.
            # Content is the model's output and is left as sent (see README, "Secrets").
            if error is not None:
                error.message = redact(error.message, self._secrets)
            # Every vendor string we keep; the assembler redacts them as they are stored
            # too, so no event before this one shows an echoed key (this catches a plugin
            # that sets them on the message itself).
            for name in ("raw_stop_reason", "response_id", "response_model", "request_id"):
                value = getattr(m, name)
                if isinstance(value, str):
                    setattr(m, name, redact(value, self._secrets))
        try:
            self._asm.finalize(error, read_output=False)
            await self._read_output()
        except Exception as exc:  # a bug: the message still ends, as an error, never a raise
            logger.debug("finalize failed: %s", redact(traceback.format_exc(), self._secrets))
            m.stop_reason = "error"
            m.error = StreamError(
                kind="protocol", message=redact(f"{type(exc).__name__}: {exc}", self._secrets)
            )
        if self._started is not None:
            self._record_timing()
        self._queue.append(MessageEnd(m))
        if drained is not None:
            # A tail already received (the usual chunked end) is read within a few turns
            # of the event loop: let it, so a next call made at once finds the connection
            # in the pool. Never a wait on the server, and never a cancellation point.
            for _ in range(_SETTLE_TURNS):
                if drained.is_set():
                    break
                await anyio.lowlevel.cancel_shielded_checkpoint()

    def _record_timing(self) -> None:
        m, started, first = self.message, self._started, self._asm.first_update
        assert started is not None
        m.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        if first is not None:
            m.ttft_ms = round((first - started) * 1000, 3)
        span, self._span = self._span, None
        if span is not None:
            span.end(m, first)


bind_stream(AssistantStream)


_otel_module: Any = None


def _otel() -> Any:
    """`stream_core._otel` when OpenTelemetry is installed, else None (looked up once;
    nothing is imported without it)."""
    global _otel_module
    if _otel_module is None:
        _otel_module = False
        if importlib.util.find_spec("opentelemetry") is not None:
            try:
                from . import _otel as module
            except ImportError:
                pass
            else:
                _otel_module = module
    return _otel_module or None


_NONE: Any = object()
_UNSTREAMED_LIMIT = 32 * 1024 * 1024
_HEAD_LIMIT = 512
_SETTLE_TURNS = 16
"""Event-loop turns a finished call gives its drain task (see `_finish`)."""
_NON_SPACE = re.compile(rb"\S")


def _frames_in(decoder: Decoder, body: bytes) -> bool:
    """Whether `body` decodes to at least one frame (a binary framing refuses a web page
    outright: that is a no, not an error of its own)."""
    try:
        return bool([*decoder.decode(body), *decoder.flush()])
    except ProtocolError:
        return False


async def _one_chunk(body: bytes) -> typing.AsyncIterator[bytes]:
    yield body


async def _no_chunks() -> typing.AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover


_PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


def _proxied() -> bool:
    """Whether the environment names a proxy, which may itself be reached over TLS."""
    return any(os.environ.get(v) for n in _PROXY_VARIABLES[:3] for v in (n, n.lower()))


def _environment_error(exc: Exception) -> StreamError:
    """Why the shared HTTP client could not be made, naming the proxy variables set (their
    names only: a proxy URL may hold a password)."""
    text = re.sub(r"//[^/\s@'\"]*@", "//[redacted]@", f"{type(exc).__name__}: {exc}")[:500]
    names = [n for n in _PROXY_VARIABLES for v in (n, n.lower()) if os.environ.get(v)]
    names = list(dict.fromkeys(names))
    where = (
        f"the proxy settings in the environment ({', '.join(names)})"
        if names
        else "the environment's HTTP settings"
    )
    return StreamError(
        kind="network",
        message=f"no HTTP client could be made from {where}: {text}",
        retryable=False,
    )


def _junk(head: bytes) -> bool:
    """Whether a body's first bytes hold anything but white space and SSE comments (a
    keep-alive then a cut connection is a network failure, not junk)."""
    return any(line.strip() and not line.startswith(b":") for line in head.splitlines())


def _aborted() -> StreamError:
    return StreamError(kind="aborted", message="cancelled by options.cancel")


class _Expired(Exception):
    """An `_interruptible` await reached its deadline."""


def _close_awaitable(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
