"""The HTTP step: what a response that is not our stream means, and when to ask again.

`AssistantStream` sends the request and reads the body; this module turns everything else
into a `StreamError` or a decision, with no state of its own: a 3xx (reported, never
followed), an error status and its body (read up to a cap, after content decoding), a full
connection pool, a transport failure's text, a 2xx body that is not the API's stream (a
whole JSON answer, a mislabelled stream, a login page), and the retry-delay policy.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
import typing
from typing import Any

import anyio
import httpx
from pydantic_core import from_json

from .._decoding.body import body_chunks, close_body
from .._decoding.sse import Decoder
from .._error_text import (
    _ERROR_BODY_LIMIT,
    _snippet,
    request_id,
    retry_after_seconds,
    retry_delay_in_body,
    vendor_error_text,
)
from .._errors import ProtocolError, StreamFailure, error_from_status, redact
from .._limits.headers import limits_from_headers
from .._options import StreamOptions
from .._transport import (
    _loop_key,
    _own_socket,
    _spawn_detached,
    connections_in_use,
    shared_client_async,
)
from .._types import RateLimit, StreamError
from .._wire import WireAPI
from .admission import Admission
from .state import _CONNECT, _NONE, _READ, _Expired

__all__ = [
    "UNSTREAMED_LIMIT",
    "HttpStep",
    "error_of",
    "net_text",
    "pool_full_error",
    "read_capped",
    "read_unstreamed",
    "redirect_error",
    "retry_delay",
    "where",
]

logger = logging.getLogger("stream_core")

UNSTREAMED_LIMIT = 32 * 1024 * 1024
"""The most of a 2xx body that is not the API's stream that is read."""
_NON_SPACE = re.compile(rb"\S")


def where(request: httpx.Request | None) -> str:
    """`POST https://host/path` of the request, for error texts: no query string (it may
    carry a key) and no user info."""
    if request is None:
        return "the request"
    url = request.url
    host = f"[{url.host}]" if ":" in url.host else url.host  # IPv6
    port = f":{url.port}" if url.port is not None else ""
    return f"{request.method} {url.scheme}://{host}{port}{url.path}"


def net_text(exc: Exception, request: httpx.Request | None, secrets: tuple[str, ...]) -> str:
    text = str(exc) or type(exc).__name__
    return redact(f"{type(exc).__name__} on {where(request)}: {text}", secrets)


async def error_of(
    response: httpx.Response,
    request: httpx.Request | None,
    secrets: tuple[str, ...],
    limits: list[RateLimit] | None = None,
) -> StreamError:
    """The error of a 4xx/5xx response. Its body is read up to its cap, counted after
    content decoding (a small compressed body cannot inflate past it), then closed.
    `limits`: what its headers report (`limits_from_headers`), read by the caller."""
    buffer = bytearray()
    unread = ""
    chunks: Any = None
    try:
        chunks = body_chunks(response)
        await read_capped(chunks, _ERROR_BODY_LIMIT, buffer)
    except ProtocolError as exc:
        unread = exc.error.message
    except httpx.HTTPError:
        pass
    finally:
        await close_body(response, chunks)
    vendor_type, text = vendor_error_text(bytes(buffer[:_ERROR_BODY_LIMIT]))
    status = response.status_code
    message = f"HTTP {status} from {where(request)}"
    if text:
        message += f": {text}"
    headers = response.headers
    retry_after = retry_after_seconds(headers)
    if retry_after is None:
        retry_after = retry_delay_in_body(bytes(buffer[:_ERROR_BODY_LIMIT]))
    if retry_after is None and response.status_code == 429:
        # No Retry-After: the reset of the limit the vendor reports used up says it.
        now = time.time()
        used_up = [r for r in limits or () if r.remaining == 0]
        waits = [w for w in (r.resets_in(now) for r in used_up) if w is not None]
        if waits:
            retry_after = round(max(waits), 3)
    error = error_from_status(
        status, redact(message, secrets), vendor_type=vendor_type, retry_after=retry_after
    )
    # The vendor's own word on retrying (OpenAI, Azure) overrides what the status says.
    should_retry = headers.get("x-should-retry")
    if should_retry in ("true", "false"):
        error.retryable = should_retry == "true"
    if unread:
        error.message += f" ({unread})"
    return error


def redirect_error(
    response: httpx.Response, request: httpx.Request | None, secrets: tuple[str, ...]
) -> StreamError:
    """A 3xx: reported, never followed (the credentials stay with the host they were
    meant for), and not retried: asking again gets the same redirect."""
    status = response.status_code
    location = " ".join(response.headers.get("location", "").split())[:500]
    to = f"redirected to {location}" if location else "a redirect with no Location"
    message = (
        f"HTTP {status} from {where(request)}: {to}; not followed, so the request's "
        "credentials never reach another address (set base_url to where the API is)"
    )
    return StreamError(kind="invalid_request", message=redact(message, secrets), status_code=status)


def pool_full_error(
    client: httpx.AsyncClient, request: httpx.Request, pool_timeout: float | None
) -> StreamError:
    # Not retried: another attempt would wait in the same queue behind the same streams.
    in_use = connections_in_use(client, request.url)
    return StreamError(
        kind="timeout",
        message=f"connection pool full: {'all' if in_use is None else in_use} in use "
        f"(no free connection within pool_timeout={pool_timeout}s)",
    )


def retry_delay(error: StreamError, attempt: int, options: StreamOptions) -> float | None:
    """Seconds to wait before attempt `attempt + 1`, or None when the error is the answer:
    not retryable, out of attempts, or a `Retry-After` longer than `max_retry_delay`.
    Otherwise the vendor's `Retry-After`, else exponential backoff with jitter, capped."""
    if not error.retryable or attempt >= options.max_retries:
        return None
    if error.retry_after is not None and error.retry_after > options.max_retry_delay:
        return None
    delay = error.retry_after
    if delay is None:
        delay = options.retry_backoff * (2**attempt) * (0.5 + random.random() / 2)
    return min(delay, options.max_retry_delay)


async def read_capped(
    chunks: typing.AsyncIterator[bytes], limit: int, buffer: bytearray | None = None
) -> bytearray:
    """The body's bytes appended to `buffer` (a new one by default), stopping once past
    `limit` (so at most one piece over it). What was read stays in `buffer` when a read
    fails part way."""
    if buffer is None:
        buffer = bytearray()
    async for part in chunks:
        buffer += part
        if len(buffer) > limit:
            break
    return buffer


def read_unstreamed(
    buffer: bytearray, wire: WireAPI, media: str
) -> tuple[Any, typing.AsyncIterator[bytes]]:
    """A 2xx answer that did not say it is our stream, read whole: (the parsed JSON answer
    for `WireAPI.parse_response`, no chunks), or (None, the body as one chunk) when it
    decodes as our framing anyway (a server that mislabels its stream). Anything else (a
    login page, plain text, an empty body) raises `ProtocolError`: no retry, asking again
    gets the same page."""
    what = media or "no content type"
    if len(buffer) > UNSTREAMED_LIMIT:
        raise ProtocolError(f"answer ({what}) over {UNSTREAMED_LIMIT} bytes")
    # The body is parsed as it is, never copied whole: a copy would double the peak.
    start = _NON_SPACE.search(buffer)
    first = buffer[start.start() : start.start() + 1] if start else b""
    if wire.parse_response is not None and first in (b"{", b"["):
        try:
            obj = from_json(buffer, allow_inf_nan=False)
        except ValueError:
            raise ProtocolError(
                f"unreadable JSON answer ({what}): {_snippet(bytes(buffer[:4096]))}"
            ) from None
        return obj, _no_chunks()
    body = bytes(buffer)
    del buffer
    if _frames_in(wire.decoder(), body):
        return None, _one_chunk(body)
    raise ProtocolError(
        f"expected a stream but got {what}"
        + (f": {_snippet(body)}" if body.strip() else " with an empty body")
    )


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


class _Reuse:
    """A request's `trace` extension: whether httpcore sent it on a connection it kept
    from an earlier request (headers sent, no new connection made)."""

    __slots__ = ("connected", "sent")

    def __init__(self) -> None:
        self.connected = self.sent = False

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith(("connect_tcp.started", "connect_unix_socket.started")):
            self.connected = True
        elif event.endswith("send_request_headers.started"):
            self.sent = True

    @property
    def reused(self) -> bool:
        return self.sent and not self.connected


def _stale(exc: httpx.TransportError) -> bool:
    """A failure that a kept-alive connection closed by the server gives before any byte
    of an answer: the server closed it (the keep-alive race), or reset it."""
    if isinstance(exc, httpx.RemoteProtocolError):
        return "without sending a response" in str(exc)
    return isinstance(exc, (httpx.ReadError, httpx.WriteError))


async def _send_once_more_if_stale(
    client: httpx.AsyncClient, request: httpx.Request
) -> httpx.Response:
    """Send the request. A kept-alive connection that the server had closed as the request
    went out is not the vendor's failure: sent again, once, at once, on another connection
    (not an attempt of `max_retries`). A new connection that fails is the vendor's."""
    extensions = request.extensions
    theirs = extensions.get("trace")
    for last in (False, True):
        reuse = _Reuse()
        extensions["trace"] = reuse if theirs is None else _both(reuse, theirs)
        try:
            return await client.send(request, stream=True, follow_redirects=False)
        except httpx.TransportError as exc:
            if last or not reuse.reused or not _stale(exc):
                raise
            logger.info("a kept-alive connection was closed by the server: sending again")
        finally:
            if theirs is None:
                extensions.pop("trace", None)
            else:
                extensions["trace"] = theirs
    raise AssertionError("unreachable")  # pragma: no cover


def _both(
    ours: _Reuse, theirs: typing.Callable[[str, dict[str, Any]], typing.Awaitable[None]]
) -> typing.Callable[[str, dict[str, Any]], typing.Awaitable[None]]:
    async def trace(event: str, info: dict[str, Any]) -> None:
        await ours(event, info)
        await theirs(event, info)

    return trace


class HttpStep(Admission):
    """The HTTP step of `AssistantStream`: connect, send, and what a failed attempt means."""

    __slots__ = ()

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
            await self._admit()
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
            response = await self._interruptible(_send_once_more_if_stale(
                self._client, self._request), first_byte)  # fmt: skip
            headers = response.headers
            rid = request_id(headers)
            self.message.request_id = redact(rid, self._secrets) if rid else rid
            limits = limits_from_headers(headers, time.time())
            if limits is not None:
                self.message.limits = limits
            ticket = self._ticket
            if ticket is not None:
                ticket.answered = response.status_code < 300
                if limits is not None:
                    ticket.report = [[r.name, r.limit, r.remaining, r.resets_at] for r in limits]
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
            return redirect_error(response, self._request, self._secrets)
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
        error = await error_of(response, self._request, self._secrets, limits)
        return self._status_error(response, error)

    def _status_error(self, response: httpx.Response, error: StreamError) -> StreamError:
        """The error of a 4xx/5xx response, its body read (`http.error_of`): the hook a
        subclass refines (the faux model's scripted kinds)."""
        return error

    async def _read_unstreamed(self, media: str) -> None:
        """A 2xx answer that did not say it is our stream: read whole and decided on
        (`_http.read_unstreamed`); the response is closed first."""
        buffer = await read_capped(self._chunks, UNSTREAMED_LIMIT)
        await self._close_response()
        self._whole, self._chunks = read_unstreamed(buffer, self._wire, media)
        if self._whole is None:
            self._whole = _NONE

    def _pool_full_error(self) -> StreamError:
        assert self._client is not None and self._request is not None
        return pool_full_error(self._client, self._request, self._options.pool_timeout)

    def _net_text(self, exc: Exception) -> str:
        return net_text(exc, self._request, self._secrets)

    async def _may_retry(self, error: StreamError) -> bool:
        """Sleep and reset for another attempt when the contract allows one."""
        if self._asm.updated:
            return False  # never after content: the retry would repeat it
        delay = retry_delay(error, self._attempt, self._options)
        if delay is None:
            return False
        if self._deadline is not None and anyio.current_time() + delay >= self._deadline:
            return False  # no time left for another attempt: this error is the answer
        self._attempt += 1
        logger.info("%s: retrying after %.2fs (%s)", self._wire.api, delay, error.kind)
        await self._settle(error)
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
