"""The transport room: the HTTP client calls run on, and the socket under a response.

Calls without `options.client` share one keep-alive `httpx.AsyncClient` per event loop
(`shared_client`), made on first use and closed when the loop ends. Tasks that must outlive
one `__anext__` (the close, a stream's cancel watcher) run outside any task group
(`_spawn_detached`). `_own_socket` finds the HTTP/1.1 socket whose reads carry the idle
timeout and that a cancel shuts down; `_stream` decides when. Connection settings (the drain
after the terminal event) live here so transport set-up has one home; the pool limits,
which a user sets, are `_connections`'.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import weakref
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol

import anyio
import httpx

from ._connections import limits as _limits
from ._errors import ProtocolError

# --- the response's socket ----------------------------------------------------------------


class _Socket(Protocol):
    """All cancel needs of a socket: a `socket.socket` or asyncio's wrapper of one."""

    def shutdown(self, how: int, /) -> None: ...


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


# --- the body's bytes ---------------------------------------------------------------------

_PIECE = 64 * 1024
"""The most one step of content decoding yields: a small compressed body that inflates to
gigabytes is decoded a bounded piece at a time, so whoever reads it can stop at its cap."""


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The response body's bytes, content-decoded here, never by httpx.

    httpx decodes a whole network read at once, with no bound on what it inflates to (1.8 KB
    of `gzip, gzip` is a gigabyte). We ask for `accept-encoding: identity`; a server that
    compresses anyway gets one layer of gzip or deflate (or br, with a `brotli` that can
    bound its output) decoded `_PIECE` bytes at a time. Stacked or unknown codings, which no
    vendor sends, raise `ProtocolError` without a byte decoded. A body already in memory (a
    mock's) is read as httpx has it.
    """
    header = response.headers.get("content-encoding", "")
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if response.is_stream_consumed or not codings:
        return response.aiter_bytes() if response.is_stream_consumed else response.aiter_raw()
    if len(codings) > 1 or _inflater(codings[0]) is None:
        raise ProtocolError(f"body in content-encoding {header[:80]!r}: not decoded")
    return _decoded(response.aiter_raw(), codings[0])


def _inflater(coding: str) -> Callable[[bytes, int], bytes] | None:
    """A bounded step `(data, max_out) -> out` for `coding`; None for one we don't decode.

    `data` is the input not consumed by the previous step, or b"" for more of its output."""
    if coding in ("gzip", "x-gzip", "deflate"):
        return _Inflate(coding).step
    if coding == "br":
        try:
            import brotli  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            return None
        dec = brotli.Decompressor()
        try:
            dec.process(b"", output_buffer_limit=1)
        except TypeError:  # an older brotli cannot bound its output
            return None

        def unbrotli(data: bytes, limit: int) -> bytes:
            if not data and dec.can_accept_more_data():
                return b""
            return bytes(dec.process(data, output_buffer_limit=limit))

        return unbrotli
    return None


class _Inflate:
    __slots__ = ("_d", "_first", "_raw_fallback")

    def __init__(self, coding: str) -> None:
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS)
        self._first = True
        self._raw_fallback = coding == "deflate"

    def step(self, data: bytes, limit: int) -> bytes:
        d = self._d
        data = data or d.unconsumed_tail
        try:
            out = d.decompress(data, limit)
        except zlib.error:
            if not (self._raw_fallback and self._first):
                raise
            # Some servers send raw deflate, without the zlib wrapper.
            d = self._d = zlib.decompressobj(-zlib.MAX_WBITS)
            out = d.decompress(data, limit)
        self._first = False
        return out


async def _decoded(raw: AsyncIterator[bytes], coding: str) -> AsyncIterator[bytes]:
    step = _inflater(coding)
    assert step is not None
    try:
        async for data in raw:
            out = step(data, _PIECE)
            while out:
                yield out
                # The rest of this input, or more output from it, a piece at a time.
                out = step(b"", _PIECE)
    except zlib.error as exc:
        raise ProtocolError(f"body in content-encoding {coding!r} is corrupt: {exc}") from None
    except Exception as exc:
        if type(exc).__name__ != "error":  # brotli.error
            raise
        raise ProtocolError(f"body in content-encoding {coding!r} is corrupt") from None
    finally:
        aclose = getattr(raw, "aclose", None)
        if aclose is not None:
            await aclose()


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


def shared_limits() -> httpx.Limits:
    """The limits a shared client is made with now (`configure_connections` sets them)."""
    return httpx.Limits(
        max_connections=_limits.max_connections,
        max_keepalive_connections=_limits.max_keepalive,
        keepalive_expiry=_limits.keepalive_expiry,
    )


def connections_in_use(client: httpx.AsyncClient, url: httpx.URL) -> int | None:
    """How many of the pool's connections carry a request, for the "pool full" error; None
    when the client's transport for `url` is neither ours nor httpx's own."""
    try:
        transport = client._transport_for_url(url)
        if isinstance(transport, PoolTransport):
            return transport.in_use
        pool = transport._pool  # type: ignore[attr-defined]
        return sum(not c.is_idle() for c in pool.connections)
    except Exception:
        return None


_SHARDS = 16
"""httpcore pools behind an unlimited shared client (see `PoolTransport`)."""


class PoolTransport(httpx.AsyncBaseTransport):
    """The shared clients' transport: httpx's own, split over several httpcore pools, with
    our own wait for a free connection when the pool has a limit.

    httpcore 1.0's pool re-examines every connection and every queued request each time a
    request arrives or ends (`_assign_requests_to_connections`): with C connections open and
    Q requests queued that is O(C + Q*C) per event, and a burst of N calls costs O(N^2) with
    no limit, O(N*Q*C) with one (1,000 calls on a 256-connection pool under a hostile server
    spent minutes of CPU there). Without a limit, requests go to the least busy of
    `_SHARDS` pools, so each one holds 1/`_SHARDS` of the connections (sequential calls all
    go to the first pool and reuse its connection); the idle connections kept are split
    between them too, which matters as much: httpcore checks each idle connection against
    every connection (O(idle * C) per event; 256 idle in one pool made a 600-call burst
    spend 75 s of CPU there). With a limit, one pool, and calls past
    the limit wait here, FIFO, never in httpcore's queue; the wait ends at the request's
    `pool` timeout with `httpx.PoolTimeout`.
    """

    def __init__(self, context: ssl.SSLContext, limits: httpx.Limits) -> None:
        bounded = limits.max_connections is not None
        count = 1 if bounded else _SHARDS
        keepalive = limits.max_keepalive_connections
        self._limits = httpx.Limits(
            max_connections=limits.max_connections,
            # The idle connections kept, in all: shared between the pools.
            max_keepalive_connections=None if keepalive is None else -(-keepalive // count),
            keepalive_expiry=limits.keepalive_expiry,
        )
        self._context = context
        self._pools: list[httpx.AsyncHTTPTransport | None] = [None] * count
        self._busy = [0] * count
        self._gate = anyio.Semaphore(limits.max_connections) if limits.max_connections else None
        self.in_use = 0
        """Requests holding a connection: sent, and their response not yet closed."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        gate = self._gate
        if gate is not None:
            try:
                gate.acquire_nowait()
            except anyio.WouldBlock:
                await self._wait(gate, request)
        busy = self._busy
        index = busy.index(min(busy))
        pool = self._pools[index] or self._pool(index)
        busy[index] += 1
        self.in_use += 1
        try:
            response = await pool.handle_async_request(request)
        except BaseException:
            self._release(index)
            raise
        response.stream = _Releasing(response.stream, self, index)
        return response

    async def _wait(self, gate: anyio.Semaphore, request: httpx.Request) -> None:
        timeout = request.extensions.get("timeout", {}).get("pool")
        with anyio.move_on_after(timeout):
            await gate.acquire()
            return
        raise httpx.PoolTimeout(f"connection pool full: {self.in_use} in use", request=request)

    def _pool(self, index: int) -> httpx.AsyncHTTPTransport:
        pool = self._pools[index] = httpx.AsyncHTTPTransport(
            verify=self._context, limits=self._limits
        )
        return pool

    def _release(self, index: int) -> None:
        self._busy[index] -= 1
        self.in_use -= 1
        if self._gate is not None:
            self._gate.release()

    async def aclose(self) -> None:
        for pool in self._pools:
            if pool is not None:
                await pool.aclose()


class _Releasing(httpx.AsyncByteStream):
    """A response body that gives its connection's place back when closed. Iterating it is
    iterating the body underneath: no layer per chunk."""

    __slots__ = ("_index", "_open", "_stream", "_transport")

    def __init__(self, stream: Any, transport: PoolTransport, index: int) -> None:
        self._stream = stream
        self._transport = transport
        self._index = index
        self._open = True

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream.__aiter__()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            try:
                await self._stream.aclose()
            finally:
                self._transport._release(self._index)


_shared: weakref.WeakKeyDictionary[object, httpx.AsyncClient] = weakref.WeakKeyDictionary()
# The `configure_connections` generation each loop's client was made with: a newer one
# makes the loop's next call build a new client.
_generation: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
# After the terminal event the rest of the body is read this long, at most this much, so the
# connection goes back to the pool (`AssistantStream._drain`).
_DRAIN_TIMEOUT = 0.05
_DRAIN_LIMIT = 64 * 1024


_ssl_context: ssl.SSLContext | None = None
_ssl_lock = threading.Lock()


def _client_setup() -> ssl.SSLContext:
    """The process's one TLS context for the shared clients, made on first use.

    Loading the certificate bundle costs some 80-170 ms and the first client construction
    imports httpcore (and trio, where installed): work a first call must not do on the
    event loop. `shared_client_async` runs this in a worker thread (OpenSSL releases the
    GIL while it reads the bundle), once per process rather than once per event loop.
    """
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            import httpcore  # noqa: F401 - httpx imports it at the first client: do it here

            # What `httpx.AsyncClient(verify=True)` builds: certifi's bundle, or
            # SSL_CERT_FILE / SSL_CERT_DIR from the environment.
            _ssl_context = httpx.create_ssl_context(trust_env=True)
        return _ssl_context


def _current(key: object) -> httpx.AsyncClient | None:
    client = _shared.get(key)
    if client is None or client.is_closed or _generation.get(key) != _limits.generation:
        return None
    return client


def _new_client(key: object, context: ssl.SSLContext) -> httpx.AsyncClient:
    limits = shared_limits()
    client = httpx.AsyncClient(timeout=None, limits=limits, verify=context)
    # Swapped in after construction: httpx ignores HTTP(S)_PROXY for a client given a
    # `transport=`, and the proxy transports it makes from them must stay.
    client._transport = PoolTransport(context, limits)
    # A client replaced after `configure_connections` keeps serving its open streams and
    # is closed with its loop, like any other.
    _shared[key] = client
    _generation[key] = _limits.generation
    _spawn_detached(lambda: _close_at_loop_end(client))
    return client


def shared_client() -> httpx.AsyncClient:
    """The keep-alive client that calls without `options.client` share on this event loop.

    One per loop (asyncio loop or trio run), made on first use (TLS set-up costs some
    20 ms, so once, not per call) and closed when the loop ends. Timeouts come with each
    request, so the client has none of its own. Calls take it through
    `shared_client_async`, which never does the process's first set-up on the loop; this
    synchronous form does it in place when nothing did it before.
    """
    key = _loop_key()
    client = _current(key)
    if client is None:
        client = _new_client(key, _ssl_context or _client_setup())
    return client


async def shared_client_async() -> httpx.AsyncClient:
    """`shared_client()`, with the process's first set-up (TLS context, httpcore import)
    done in a worker thread, off the event loop."""
    key = _loop_key()
    client = _current(key)
    if client is not None:
        return client
    context = _ssl_context
    if context is None:
        context = await anyio.to_thread.run_sync(_client_setup)
    client = _current(key)  # another call may have made it while this one waited
    if client is None:
        client = _new_client(key, context)
    return client


async def _close_at_loop_end(client: httpx.AsyncClient) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
