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
import dataclasses
import email.utils
import html
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
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import httpx
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from ._assembler import Assembler, StopRule
from ._cost import cost_context
from ._errors import ProtocolError, StreamFailure, error_from_status, redact, secrets_in
from ._events import AssistantStreamEvent, MessageEnd, MessageStart
from ._handoff import sanitize_surrogates
from ._models import Model
from ._options import StreamOptions
from ._sse import Decoder, FramingError, SSEBytesDecoder
from ._types import (
    KEEP_UNKNOWN_BLOCKS,
    AssistantMessage,
    Context,
    StreamError,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from ._otel import ChatSpan

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
    """The body's framing: SSE, `NDJSONBytesDecoder` for newline-delimited JSON, or
    `EventStreamDecoder` for AWS's binary event-stream."""
    sign: Callable[[httpx.Request, Model, StreamOptions, str | None], tuple[str, ...]] | None = None
    """Signs the finished request in place, exact body bytes included (AWS SigV4), given the
    API key if one was found; returns the secrets it used (for redaction). Raising
    `StreamFailure` (e.g. kind `auth`: no credentials) ends the stream with that error."""
    parse_response: Callable[[Assembler, Any], None] | None = None
    """Reads the vendor's non-streamed JSON answer (a proxy that ignored `stream: true`)
    as a whole: the same assembler calls as if it had streamed in one piece, ending with
    `asm.finished = True`. None: such an answer ends the stream `protocol`."""
    compat: type[Any] | None = None
    """The dataclass of per-endpoint flags `Model.compat` may set (None: it takes none);
    an unknown key or a value of the wrong type raises at the call, naming the key."""
    base_url_env: Mapping[str, str] = field(default_factory=dict)
    """Vendor default base URL -> the environment variable that replaces it (the official
    SDK's own, e.g. `OPENAI_BASE_URL`). Only a model still at that default is redirected."""
    providers: Mapping[str, str] = field(default_factory=dict)
    """Provider names this API serves -> their default base URL, so a model outside the
    catalog can be named as `provider/model-id` (e.g. `ollama/llama3.2`)."""
    bearer_token: Callable[[Model], Awaitable[str | None]] | None = None
    """When no API key is configured: awaited once at connect for an OAuth token (e.g.
    Vertex AI's Application Default Credentials), sent as `authorization: Bearer` and
    redacted like a key. Blocking I/O belongs in a worker thread (`anyio.to_thread`)."""

    def open(
        self,
        model: Model,
        context: Context | dict[str, Any],
        options: StreamOptions | None = None,
    ) -> AssistantStream:
        context = _check_call(self, model, context, options)
        return AssistantStream(self, model, context, options or StreamOptions())


def _check_call(wire: WireAPI, model: Any, context: Any, options: Any) -> Context:
    """Programmer errors raise here, before any I/O, naming the bad field.

    The context is validated again even when it is a `Context` (a field assigned after
    construction is not checked by pydantic), and the copy is what gets sent: the caller's
    object is never mutated, nor read again while the stream runs."""
    api = wire.api
    if not isinstance(model, Model):
        raise TypeError(f"model must be a stream_core.Model, not {type(model).__name__}")
    if model.api != api:
        raise ValueError(f"model.api is {model.api!r} but this provider serves {api!r}")
    if model.compat:
        _check_compat(wire, model.compat)
    keep_unknown = None
    if options is not None:
        if not isinstance(options, StreamOptions):
            raise TypeError(f"options must be StreamOptions or None, not {type(options).__name__}")
        options.validate()  # again: a field may have been changed since construction
    if isinstance(context, Context):
        for i, m in enumerate(context.messages):
            if not isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage)):
                raise TypeError(
                    f"context.messages[{i}] is a {type(m).__name__}, not a message "
                    "(filter JSONL records with messages_only())"
                )
        # Blocks of unknown types loaded from a history stay what they were.
        keep_unknown = KEEP_UNKNOWN_BLOCKS
        context = context.model_dump(warnings=False)
    elif not isinstance(context, dict):
        raise TypeError(f"context must be a stream_core.Context, not {type(context).__name__}")
    try:
        checked = Context.model_validate(context, context=keep_unknown)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "context." + ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from None
    for i, tool in enumerate(checked.tools or ()):
        _check_json(tool.parameters, f"context.tools[{i}].parameters")
    for i, m in enumerate(checked.messages):
        if isinstance(m, AssistantMessage):
            for j, block in enumerate(m.content):
                if isinstance(block, ToolCall):
                    _check_json(block.arguments, f"context.messages[{i}].content[{j}].arguments")
    return checked


def _check_json(value: Any, where: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{where}: not JSON: {exc}") from None


def _check_compat(wire: WireAPI, compat: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first `Model.compat` key `wire` does not know, or whose
    value has the wrong type: a typo must not be silently dropped."""
    if wire.compat is None:
        raise ValueError(
            f"model.compat: {wire.api} takes no compat flags (got {', '.join(map(repr, compat))})"
        )
    adapters = _field_adapters(wire.compat)
    for key, value in compat.items():
        adapter = adapters.get(key)
        if adapter is None:
            raise ValueError(
                f"model.compat: unknown key {key!r} for {wire.api} "
                f"(known: {', '.join(sorted(adapters))})"
            )
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            raise ValueError(f"model.compat.{key}: {exc.errors()[0]['msg']}") from None


_ADAPTERS: dict[type[Any], dict[str, TypeAdapter[Any]]] = {}


def _field_adapters(cls: type[Any]) -> dict[str, TypeAdapter[Any]]:
    adapters = _ADAPTERS.get(cls)
    if adapters is None:
        hints = typing.get_type_hints(cls)
        adapters = {f.name: TypeAdapter(hints[f.name]) for f in dataclasses.fields(cls)}
        _ADAPTERS[cls] = adapters
    return adapters


def _endpoint(wire: WireAPI, model: Model, options: StreamOptions) -> Model:
    """The model as it is sent: `options.base_url` wins; else the vendor SDK's variable
    (`OPENAI_BASE_URL`, ...) replaces the vendor's default host, never a URL the model
    chose itself, so a gateway or a local server needs no code change."""
    url = options.base_url or None
    if url is None:
        env = wire.base_url_env.get(model.base_url.rstrip("/"))
        url = (os.environ.get(env) or None) if env else None
    if url is None or url == model.base_url:
        return model
    return model.model_copy(update={"base_url": url})


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
        self._pricing = cost_context(model, options)
        self._asm = Assembler(self.message, model, wire.stop_reasons, self._queue, self._pricing)
        self._state = _START
        self._client: httpx.AsyncClient | None = None
        self._response: httpx.Response | None = None
        self._chunks: Any = None
        self._decoder = wire.decoder()
        self._translate: Translator | None = None
        self._secrets: tuple[str, ...] = ()
        self._no_key: StreamError | None = None
        """A missing API key or credential: the environment, not the code, so it is the
        first event."""
        self._attempt = 0
        self._whole: Any = _NONE
        self._scope: anyio.CancelScope | None = None
        """The scope of the await in progress that `options.cancel` may interrupt."""
        self._socket: _Socket | None = None
        """The response's own socket, when its reads honour the transport's read timeout."""
        self._stop_watch: Callable[[], object] | None = None
        self._started: float | None = None
        self._span: ChatSpan | None = None
        # Built now, inside `stream()`: a bad context, option or payload hook raises here,
        # before any I/O (CONTRACT 1). What the environment lacks (a key, credentials, a
        # project) is not the code's fault: it becomes the stream's first event instead.
        self._request: httpx.Request | None = None
        try:
            self._request = self._build()
        except StreamFailure as failure:
            self._no_key = failure.error

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
            otel = _otel()
            if otel is not None:
                self._span = otel.start_span(self._model, self._options)
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
        if self._no_key is not None:
            raise StreamFailure(self._no_key)
        if self._options.cancel is not None and self._stop_watch is None:
            self._stop_watch = _spawn_detached(self._watch_cancel)
        fetch = self._wire.bearer_token
        request = self._request
        assert request is not None
        if fetch is not None and not self._secrets and "authorization" not in request.headers:
            # An OAuth token (Vertex AI's default credentials) is I/O: fetched here, once.
            token = await self._interruptible(fetch(self._model), None)
            if token:
                self._secrets += (token,)
                request.headers["authorization"] = f"Bearer {token}"
        opts = self._options
        while True:
            if self._client is None:
                self._client = opts.client or shared_client()
            error = await self._send()
            if error is None:
                return
            if not await self._may_retry(error):
                raise StreamFailure(error)

    def _build(self) -> httpx.Request:
        wire, opts = self._wire, self._options
        model = _endpoint(wire, self._model, opts)
        api_key = opts.api_key
        env = wire.api_key_env(model)
        if api_key is None and env:
            api_key = os.environ.get(env) or None
        req = wire.build_request(model, self._context, opts)
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
            connect=opts.connect_timeout, read=None, write=60.0, pool=opts.connect_timeout
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
            response = await self._interruptible(
                self._client.send(self._request, stream=True), first_byte
            )
            self.message.request_id = request_id(response.headers)
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
            media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if media not in self._decoder.media_types:
                await self._read_unstreamed(media)
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

    async def _read_unstreamed(self, media: str) -> None:
        """A 2xx answer that did not say it is our stream: read it whole and decide.

        A complete JSON answer goes to `WireAPI.parse_response`; a body that decodes as
        our framing anyway (a server that mislabels its stream) is replayed as one chunk;
        anything else (a login page, plain text, an empty body) ends the stream `protocol`,
        with no retry: asking again gets the same page.
        """
        body = b""
        async for part in self._chunks:
            body += part
            if len(body) > _UNSTREAMED_LIMIT:
                break
        await self._close_response()
        what = media or "no content type"
        head = body.lstrip()
        if self._wire.parse_response is not None and head[:1] in (b"{", b"["):
            try:
                obj = from_json(body, allow_inf_nan=False)
            except ValueError:
                raise ProtocolError(f"unreadable JSON answer ({what}): {_snippet(body)}") from None
            self._whole = obj
            self._chunks = _no_chunks()
            return
        if len(body) <= _UNSTREAMED_LIMIT and _frames_in(self._wire.decoder(), body):
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
        m.response_model = None
        self._queue.clear()
        self._asm = Assembler(m, self._model, self._wire.stop_reasons, self._queue, self._pricing)
        self._decoder = self._wire.decoder()
        self._translate = None
        self._whole = _NONE

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
        failure: FramingError | None = None
        try:
            events = self._decoder.decode(chunk) if chunk is not None else self._decoder.flush()
        except FramingError as exc:
            events, failure = exc.frames, exc  # what came before the bad bytes still counts
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
            raise failure
        if chunk is None:
            if asm.complete_at_eof:
                await self._finish(None)
                return
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
        m = self.message
        if self._secrets:
            # One place for every error text, vendor words included (an error event or a
            # quoted malformed line may echo the key), and for the vendor's short strings.
            # Content is the model's output and is left as sent (see README, "Secrets").
            if error is not None:
                error.message = redact(error.message, self._secrets)
            if m.raw_stop_reason is not None:
                m.raw_stop_reason = redact(m.raw_stop_reason, self._secrets)
            if m.response_id is not None:
                m.response_id = redact(m.response_id, self._secrets)
        try:
            self._asm.finalize(error)
        except Exception as exc:  # a bug: the message still ends, as an error, never a raise
            logger.debug("finalize failed: %s", redact(traceback.format_exc(), self._secrets))
            m.stop_reason = "error"
            m.error = StreamError(
                kind="protocol", message=redact(f"{type(exc).__name__}: {exc}", self._secrets)
            )
        if self._started is not None:
            self._record_timing()
        self._queue.append(MessageEnd(m))

    def _record_timing(self) -> None:
        m, started, first = self.message, self._started, self._asm.first_update
        assert started is not None
        m.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        if first is not None:
            m.ttft_ms = round((first - started) * 1000, 3)
        span, self._span = self._span, None
        if span is not None:
            span.end(m, first)


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


_REQUEST_ID_HEADERS = (
    "request-id",  # Anthropic
    "x-request-id",  # OpenAI and most compatible servers
    "x-amzn-requestid",  # AWS
    "apim-request-id",  # Azure
    "x-ms-request-id",
)


def request_id(headers: httpx.Headers) -> str | None:
    """The vendor's request id from response headers, if it sent one."""
    for name in _REQUEST_ID_HEADERS:
        value: str | None = headers.get(name)
        if value:
            return value[:200]
    return None


_NONE: Any = object()
_UNSTREAMED_LIMIT = 32 * 1024 * 1024
# A tag opens with a name, `/` or `!` and cannot hold another `<`: a run of stray `<`
# stays linear, and "a < b" in plain text is not a tag.
_TAGS = re.compile(r"<[a-zA-Z/!?][^<>]*>")
# Where a browser shows nothing until the matching close: scripts, styles, the head.
_HIDDEN_OPEN = re.compile(r"<(script|style|head|noscript|!--)", re.IGNORECASE)
_ERROR_TEXT_LIMIT = 500


def _snippet(body: bytes, limit: int = 200) -> str:
    """The first words of a body, markup stripped, for an error message."""
    text = strip_markup(body[: limit * 16].decode("utf-8", "replace"))
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def strip_markup(text: str) -> str:
    """The visible words of an HTML page (a proxy's error or login page), on one line.
    Linear in the text, whatever the markup (vendor bytes are untrusted)."""
    if "<" in text:
        text = html.unescape(_TAGS.sub(" ", _drop_hidden(text)))
    return " ".join(text.split())


def _drop_hidden(text: str) -> str:
    lower = text.lower()
    kept: list[str] = []
    pos = 0
    while (found := _HIDDEN_OPEN.search(text, pos)) is not None:
        kept.append(text[pos : found.start()])
        name = found.group(1).lower()
        closer = "-->" if name == "!--" else f"</{name}"
        end = lower.find(closer, found.end())
        if end < 0:
            return " ".join(kept)  # never closed: the rest is hidden too
        pos = end + len(closer)
        if name != "!--":
            pos = text.find(">", pos) + 1 or len(text)
    kept.append(text[pos:])
    return " ".join(kept)


def _frames_in(decoder: Decoder, body: bytes) -> bool:
    """Whether `body` decodes to at least one frame (a binary framing refuses a web page
    outright: that is a no, not an error of its own)."""
    try:
        return bool([*decoder.decode(body), *decoder.flush()])
    except ProtocolError:
        return False


def _unreadable(event: str, exc: Exception) -> str:
    return f"unreadable {event or 'data'} event: {type(exc).__name__}: {exc}"


async def _one_chunk(body: bytes) -> typing.AsyncIterator[bytes]:
    yield body


async def _no_chunks() -> typing.AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover


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
        data = None
    if data is not None:
        return vendor_error_fields(data)
    # Not JSON: a proxy's page. Its words, not its markup, and not all of them.
    text = strip_markup(text)
    if len(text) > _ERROR_TEXT_LIMIT:
        text = text[: _ERROR_TEXT_LIMIT - 3] + "..."
    return None, text


def vendor_error_fields(data: Any) -> tuple[str | None, str]:
    """(type, message) from `{"error": {...}}`, `{"type": "error", "error": {...}}` or a
    bare error object; an OpenRouter upstream detail (`metadata.raw`) is appended.

    Vendor JSON of any shape gives strings (never raises): a field of the wrong type is
    shown as its JSON text, or skipped where a name is due."""
    err = data.get("error", data) if type(data) is dict else data
    if type(err) is str:
        return None, err
    if type(err) is not dict:
        return None, _as_text(err)
    kind = _name(err.get("type")) or _name(err.get("code"))
    code = _name(err.get("code"))
    message = next(
        (_as_text(v) for v in (err.get("message"), err.get("detail")) if v not in (None, "")),
        kind or "unknown error",
    )
    metadata = err.get("metadata")
    raw = metadata.get("raw") if type(metadata) is dict else None
    if raw not in (None, ""):
        message += f"\n{_as_text(raw)}"
    # A specific code (context_length_exceeded) says more than a generic type.
    if (
        code
        and code != kind
        and kind == "invalid_request_error"
        and not code.isdigit()  # a proxy's "400" is a status (see `error_from_vendor`)
    ):
        kind = code
    return kind, message


def _name(value: Any) -> str | None:
    """A vendor error type or code: a non-empty string, or an integer code as text."""
    if type(value) is str:
        return value or None
    if type(value) is int:
        return str(value)
    return None


def _as_text(value: Any) -> str:
    if type(value) is str:
        return value
    try:
        return json.dumps(value, ensure_ascii=False)[:2000]
    except (TypeError, ValueError):  # pragma: no cover - vendor JSON always dumps
        return type(value).__name__


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
