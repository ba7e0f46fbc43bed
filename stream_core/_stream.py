"""`AssistantStream` and the one pipeline every wire API runs through.

    stream() ── validate (raise now) ── AssistantStream
    __anext__ ─ message_start ─ request (retries) ─ chunk ─ decode ─ translate ─ events
                                                   └─ idle: socket read timeout
                                                      cancel: one watcher per stream

Everything after `stream()` returns is encoded in events; nothing raises. The stream is a
class, not a generator, so no cancel scope ever spans a `yield` (anyio's rule). Decoding,
translation and assembly are synchronous: the only await per network chunk is the read.

Timeouts and cancel cost nothing per chunk on a real connection (see `_read_chunk`): the
idle timeout is the transport's own per-read socket timeout, and `options.cancel` is
watched by one detached task per stream that shuts the socket down when the event is set.
Bodies that do not come from a socket (mock or ASGI transports, HTTP/2 multiplexing) are
read inside one cancel scope per read instead. Without an injected client, calls share one
keep-alive client per event loop (`shared_client`).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import random
import socket
import time
import traceback
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypeVar

import anyio
import httpx
from pydantic import ValidationError
from pydantic_core import from_json

from ._assembler import Assembler, StopRule
from ._errors import ProtocolError, StreamFailure, error_from_status, redact
from ._events import AssistantStreamEvent, MessageEnd, MessageStart
from ._handoff import sanitize_surrogates
from ._models import Model
from ._options import StreamOptions
from ._sse import Decoder, SSEBytesDecoder
from ._types import AssistantMessage, Context, StreamError

__all__ = ["AssistantStream", "Translator", "WireAPI", "WireRequest", "parse_json"]

logger = logging.getLogger("stream_core")
T = TypeVar("T")

_ERROR_BODY_LIMIT = 64 * 1024


@dataclass
class WireRequest:
    url: str
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


Translator = Callable[[str, str], None]
"""Called with (SSE event name, data) for every event; drives the assembler."""


def parse_json(data: str, event: str) -> Any:
    """Parse an event's data, or end the stream with a protocol error naming the event."""
    try:
        return from_json(data, allow_inf_nan=False)
    except ValueError:
        snippet = data if len(data) <= 80 else data[:77] + "..."
        raise ProtocolError(f"malformed JSON in {event or 'data'} event: {snippet!r}") from None


@dataclass(frozen=True)
class WireAPI:
    """What a provider module supplies: its tables and three functions.

    `build_request(model, context, options)` turns the context into the vendor payload;
    `auth_headers(model, api_key)` says how the key is sent; `translator(asm)` returns the
    function that turns one vendor event into assembler calls.
    """

    api: str
    terminal_event: str
    stop_reasons: Mapping[str, StopRule]
    build_request: Callable[[Model, Context, StreamOptions], WireRequest]
    auth_headers: Callable[[Model, str], dict[str, str]]
    translator: Callable[[Assembler], Translator]
    api_key_env: Callable[[Model], str | None]
    """The environment variable holding the key for a model (None: no key needed)."""
    key_required: Callable[[Model], bool] = lambda model: True
    decoder: Callable[[], Decoder] = SSEBytesDecoder
    """The body's framing: SSE, or `NDJSONBytesDecoder` for newline-delimited JSON."""

    def open(
        self, model: Model, context: Context | dict[str, Any], options: StreamOptions | None
    ) -> AssistantStream:
        context = _check_call(self.api, model, context, options)
        return AssistantStream(self, model, context, options or StreamOptions())


def _check_call(api: str, model: Any, context: Any, options: Any) -> Context:
    """Programmer errors raise here, before any I/O, naming the bad field."""
    if not isinstance(model, Model):
        raise TypeError(f"model must be a stream_core.Model, not {type(model).__name__}")
    if model.api != api:
        raise ValueError(f"model.api is {model.api!r} but this provider serves {api!r}")
    if options is not None and not isinstance(options, StreamOptions):
        raise TypeError(f"options must be StreamOptions or None, not {type(options).__name__}")
    if isinstance(context, dict):
        try:
            return Context.model_validate(context)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "context." + ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where}: {first['msg']}") from None
    if not isinstance(context, Context):
        raise TypeError(f"context must be a stream_core.Context, not {type(context).__name__}")
    from ._types import AssistantMessage as _A
    from ._types import ToolResultMessage, UserMessage

    for i, m in enumerate(context.messages):
        if not isinstance(m, (UserMessage, _A, ToolResultMessage)):
            raise TypeError(
                f"context.messages[{i}] is a {type(m).__name__}, not a message "
                "(filter JSONL records with messages_only())"
            )
    return context


class _Socket(Protocol):
    def shutdown(self, how: int, /) -> None: ...


# States of the pump.
_START, _CONNECT, _READ, _DONE = range(4)


class _Aborted(Exception):
    pass


class AssistantStream:
    """Async iterator of events; `await result()` gives the final message.

    Use it as `async with`: leaving the block closes the HTTP response and ends the message
    as `aborted` if it was still streaming.
    """

    def __init__(
        self, wire: WireAPI, model: Model, context: Context, options: StreamOptions
    ) -> None:
        self._wire = wire
        self._model = model
        self._context = context
        self._options = options
        self._queue: deque[AssistantStreamEvent] = deque()
        self.message = AssistantMessage(api=wire.api, provider=model.provider, model=model.id)
        self._asm = Assembler(self.message, model, wire.stop_reasons, self._queue)
        self._state = _START
        self._client: httpx.AsyncClient | None = None
        self._response: httpx.Response | None = None
        self._chunks: Any = None
        self._decoder = wire.decoder()
        self._translate: Translator | None = None
        self._request: httpx.Request | None = None
        self._secrets: tuple[str, ...] = ()
        self._attempt = 0
        self._scope: anyio.CancelScope | None = None
        """The scope of the await in progress that `options.cancel` may interrupt."""
        self._socket: _Socket | None = None
        """The response's own socket, when its reads honour the transport's read timeout."""
        self._stop_watch: Callable[[], object] | None = None

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
            return
        try:
            if self._cancel_requested():
                raise _Aborted
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
        if self._request is None:
            self._request = self._build()
        opts = self._options
        if opts.cancel is not None and self._stop_watch is None:
            self._stop_watch = _spawn_detached(self._watch_cancel)
        while True:
            if self._client is None:
                self._client = opts.client or shared_client()
            error = await self._send()
            if error is None:
                return
            if not await self._may_retry(error):
                raise StreamFailure(error)

    def _build(self) -> httpx.Request:
        wire, model, opts = self._wire, self._model, self._options
        api_key = opts.api_key
        env = wire.api_key_env(model)
        if api_key is None and env:
            api_key = os.environ.get(env) or None
        if api_key is None and wire.key_required(model):
            where = f"set {env} or pass" if env else "pass"
            raise StreamFailure(
                StreamError(
                    kind="auth",
                    message=f"no API key for {model.provider}: {where} StreamOptions(api_key=...)",
                )
            )
        if api_key:
            self._secrets = (api_key,)
        req = wire.build_request(model, self._context, opts)
        if opts.on_payload is not None:
            replaced = opts.on_payload(req.payload, model)
            if replaced is not None:
                req.payload = replaced
        headers = {
            "accept": "text/event-stream",
            # Compressed SSE arrives all at once; ask for it plain.
            "accept-encoding": "identity",
            **req.headers,
            **(wire.auth_headers(model, api_key) if api_key else {}),
            **model.headers,
            **opts.headers,
        }
        timeout = httpx.Timeout(
            connect=opts.connect_timeout, read=None, write=60.0, pool=opts.connect_timeout
        )
        # Serialized once, here, for every provider: lone surrogates (from a truncated
        # tool output, say) cannot be encoded as UTF-8 and are removed from all outbound
        # text, tool arguments and schemas included; NaN is not JSON and fails loudly.
        body = sanitize_surrogates(json.dumps(req.payload, ensure_ascii=False, allow_nan=False))
        headers.setdefault("content-type", "application/json")
        return httpx.Request(
            "POST",
            req.url,
            headers=headers,
            content=body.encode("utf-8"),
            extensions={"timeout": timeout.as_dict()},
        )

    async def _send(self) -> StreamError | None:
        """Send the request; None on a 2xx response (kept open), else the error."""
        assert self._client is not None and self._request is not None
        first_byte = self._options.first_byte_timeout
        timeouts = self._request.extensions["timeout"]
        # Waiting for the headers is the first-byte timeout's job (the scope below); only
        # the body's reads get the transport's per-read timeout (see `_read_chunk`).
        timeouts["read"] = None
        try:
            response = await self._interruptible(
                self._client.send(self._request, stream=True), first_byte
            )
        except _Expired:
            return StreamError(
                kind="timeout",
                retryable=True,
                message=f"no response within first_byte_timeout={first_byte}s",
            )
        except httpx.TimeoutException as exc:
            return StreamError(kind="timeout", retryable=True, message=self._net_text(exc))
        except httpx.TransportError as exc:
            return StreamError(kind="network", retryable=True, message=self._net_text(exc))
        if response.status_code < 400:
            self._response = response
            self._socket = _own_socket(response)
            # Raw bytes skip one async generator per chunk, which on a socket is one per
            # event. We ask for identity; a body compressed anyway still gets decoded, and
            # so does any body not read from a socket (a mock's may be read already).
            encoded = response.headers.get("content-encoding", "identity") != "identity"
            raw = self._socket is not None and not encoded
            self._chunks = response.aiter_raw() if raw else response.aiter_bytes()
            if self._socket is not None:
                # httpcore takes the read timeout from this dict when the body is first
                # read, i.e. after this point: a socket-level idle timeout, per read.
                timeouts["read"] = self._options.idle_timeout
            return None
        try:
            body = b""
            async for part in response.aiter_bytes():
                body += part
                if len(body) > _ERROR_BODY_LIMIT:
                    break
        except httpx.HTTPError:
            pass
        finally:
            await response.aclose()
        return self._http_error(response, body)

    def _http_error(self, response: httpx.Response, body: bytes) -> StreamError:
        vendor_type, text = vendor_error_text(body)
        status = response.status_code
        message = f"HTTP {status}"
        if text:
            message += f": {text}"
        return error_from_status(
            status,
            redact(message, self._secrets),
            vendor_type=vendor_type,
            retry_after=retry_after_seconds(response.headers),
        )

    def _net_text(self, exc: Exception) -> str:
        text = str(exc) or type(exc).__name__
        return redact(f"{type(exc).__name__}: {text}", self._secrets)

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

    def _reset_message(self) -> None:
        m = self.message
        m.content.clear()
        m.usage = type(m.usage)()
        m.raw_stop_reason = None
        m.response_id = None
        self._queue.clear()
        self._asm = Assembler(m, self._model, self._wire.stop_reasons, self._queue)
        self._decoder = self._wire.decoder()
        self._translate = None

    async def _read_chunk(self) -> None:
        # The read is the one await per chunk, so it carries no cancel scope of its own when
        # the body comes from a socket: a cancel scope costs as much as the rest of the
        # event's work. There the idle timeout is the transport's read timeout (set in
        # `_send`) and `options.cancel` shuts the socket down (`_watch_cancel`). Other
        # bodies (mock transports, HTTP/2) get one scope per read with the idle deadline.
        idle = self._options.idle_timeout
        try:
            if self._socket is not None:
                chunk = await self._chunks.__anext__()
            else:
                chunk = await self._interruptible(self._chunks.__anext__(), idle)
        except StopAsyncIteration:
            chunk = None
        except (_Expired, httpx.ReadTimeout):
            raise StreamFailure(
                StreamError(
                    kind="timeout", retryable=True, message=f"no data for idle_timeout={idle}s"
                )
            ) from None
        except httpx.TransportError as exc:
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
        events = self._decoder.decode(chunk) if chunk is not None else self._decoder.flush()
        asm = self._asm
        for sse in events:
            data = sse.data
            if not data:
                continue  # no data lines: nothing to dispatch (SSE spec), e.g. a lone `retry:`
            translate(sse.event, data)
            if asm.finished:
                await self._finish(None)
                return
        if chunk is None:
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

    async def _interruptible(self, awaitable: Awaitable[T], timeout: float | None) -> T:
        """Await inside a scope that `options.cancel` can cancel, with an optional deadline.

        Raises `_Aborted` when cancelled by `options.cancel`, `_Expired` at the deadline; a
        cancel of the caller's own scope propagates. No task group: errors come out as
        they are, never wrapped in an exception group.
        """
        if self._cancel_requested():
            _close_awaitable(awaitable)
            raise _Aborted
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        with anyio.CancelScope(deadline=deadline) as scope:
            self._scope = scope
            try:
                return await awaitable
            finally:
                self._scope = None
        if self._cancel_requested():
            raise _Aborted
        raise _Expired

    async def _watch_cancel(self) -> None:
        """The one watcher per stream: wait for `options.cancel`, then interrupt the await
        in progress at once (its scope, or the socket a scope-free read is blocked on)."""
        cancel = self._options.cancel
        assert cancel is not None
        await cancel.wait()
        scope, sock = self._scope, self._socket
        if scope is not None:
            scope.cancel()
        elif sock is not None:
            # The blocked read wakes with end-of-file; the pump sees the event and aborts.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    async def _drain(self) -> None:
        """After the terminal event, read the rest of the body (the chunked-encoding end, a
        trailing newline) for a moment, so the connection goes back to the pool for the
        next call instead of being closed. A server that keeps the body open costs at most
        `_DRAIN_TIMEOUT`."""
        chunks = self._chunks
        left = _DRAIN_LIMIT
        try:
            while left > 0:
                left -= len(await self._interruptible(chunks.__anext__(), _DRAIN_TIMEOUT))
        except (StopAsyncIteration, _Expired, _Aborted, httpx.HTTPError):
            pass

    async def _close_response(self) -> None:
        response, chunks = self._response, self._chunks
        self._response = self._chunks = None
        self._socket = None
        with anyio.CancelScope(shield=True):
            if chunks is not None:
                # Close the byte iterator too: trio warns about unfinished async generators.
                await chunks.aclose()
            if response is not None:
                await response.aclose()

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
        if error is None and self._socket is not None:
            with anyio.CancelScope(shield=True):
                await self._drain()
        await self._close_response()
        # The shared client stays open for the next call on this event loop.
        self._client = None
        self._asm.finalize(error)
        self._queue.append(MessageEnd(self.message))


def _aborted() -> StreamError:
    return StreamError(kind="aborted", message="cancelled by options.cancel")


class _Expired(Exception):
    """An `_interruptible` await reached its deadline."""


_DRAIN_TIMEOUT = 0.05
_DRAIN_LIMIT = 64 * 1024


def _own_socket(response: httpx.Response) -> _Socket | None:
    """The socket under an HTTP/1.1 response read by httpcore, whose per-read timeout
    httpcore applies; None for anything else (mock transports, HTTP/2, whose socket other
    streams share, so shutting it down would end them too)."""
    stream = response.extensions.get("network_stream")
    if stream is None or response.http_version != "HTTP/1.1":
        return None
    try:
        sock = stream.get_extra_info("socket")
    except Exception:  # a custom network stream: fall back to scoped reads
        return None
    # A socket.socket, or asyncio's TransportSocket wrapper: both can be shut down.
    return sock if callable(getattr(sock, "shutdown", None)) else None


# --- detached tasks and the shared client -------------------------------------------------

_detached: set[asyncio.Task[None]] = set()
"""Strong references to detached asyncio tasks (the loop keeps only weak ones)."""


def _spawn_detached(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], object]:
    """Run `fn` in a task of its own, outside any task group, and return its canceller.

    anyio offers no such task (a task group cannot stay open across `__anext__` calls,
    which return to the caller), so this is per backend: an asyncio task, or a trio system
    task. Either is cancelled when the event loop ends.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import trio

        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await fn()

        trio.lowlevel.spawn_system_task(run)
        return scope.cancel
    task = loop.create_task(fn())
    _detached.add(task)
    task.add_done_callback(_detached.discard)
    return task.cancel


def _loop_key() -> object:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        import trio

        return trio.lowlevel.current_trio_token()


_SHARED_LIMITS = httpx.Limits(
    max_connections=256, max_keepalive_connections=32, keepalive_expiry=30.0
)
_shared: weakref.WeakKeyDictionary[object, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def shared_client() -> httpx.AsyncClient:
    """The keep-alive client that calls without `options.client` share on this event loop.

    One per loop (asyncio loop or trio run), made on first use (TLS set-up costs some
    20 ms, so once, not per call) and closed when the loop ends. Timeouts come with each
    request, so the client has none of its own.
    """
    key = _loop_key()
    client = _shared.get(key)
    if client is None or client.is_closed:
        client = httpx.AsyncClient(timeout=None, limits=_SHARED_LIMITS)
        _shared[key] = client
        _spawn_detached(lambda: _close_at_loop_end(client))
    return client


async def _close_at_loop_end(client: httpx.AsyncClient) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()


def _close_awaitable(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


def vendor_error_text(body: bytes) -> tuple[str | None, str]:
    """(vendor error type, message) from an error body, Anthropic or OpenAI shaped."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = from_json(body) if body else None
    except ValueError:
        return None, text[:2000]
    return vendor_error_fields(data) if data is not None else (None, text[:2000])


def vendor_error_fields(data: Any) -> tuple[str | None, str]:
    """(type, message) from `{"error": {...}}`, `{"type": "error", "error": {...}}` or a
    bare error object; an OpenRouter upstream detail (`metadata.raw`) is appended."""
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, str):
        return None, err
    if not isinstance(err, dict):
        return None, str(err)
    kind = err.get("type") or err.get("code")
    code = err.get("code")
    message = str(err.get("message") or err.get("detail") or kind or "unknown error")
    metadata = err.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if raw:
        message += f"\n{raw}"
    # A specific code (context_length_exceeded) says more than a generic type.
    if isinstance(code, str) and code not in ("", kind) and kind == "invalid_request_error":
        kind = code
    return (str(kind) if kind is not None else None), message


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())
