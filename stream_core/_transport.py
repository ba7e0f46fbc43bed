"""The transport room: the HTTP client calls run on, and the socket under a response.

Calls without `options.client` share one keep-alive `httpx.AsyncClient` per event loop
(`shared_client`), made on first use and closed when the loop ends. Tasks that must outlive
one `__anext__` (the close, a stream's cancel watcher) run outside any task group
(`_spawn_detached`). `_own_socket` finds the HTTP/1.1 socket whose reads carry the idle
timeout and that a cancel shuts down; `_pipeline.stream` decides when. Connection settings (pool
limits, the drain after the terminal event) live here so transport set-up has one home.
The body's decoding and closing are `_decoding.body`'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Protocol

import anyio
import httpx

from ._connections import limits as _limits
from ._decoding.body import close_body
from ._limits.redact import scrubbed


class _NoCredentialsInURLs(logging.Filter):
    """httpx logs each request's URL at INFO: a base URL's `user:password@` or `?key=`
    would reach the application's log. Its URL arguments are logged without them."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, httpx.URL) for a in args):
            record.args = tuple(scrubbed(str(a)) if isinstance(a, httpx.URL) else a for a in args)
        return True


logging.getLogger("httpx").addFilter(_NoCredentialsInURLs())

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


# --- detached tasks and the shared client -------------------------------------------------

_detached: set[asyncio.Task[None]] = set()
"""Strong references to detached asyncio tasks (the loop keeps only weak ones)."""

_closers: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
"""The detached tasks that close something when their loop ends (`close_at_loop_end`)."""

_SETTLE = 1.0
"""How long (seconds) a loop-end closer waits for the loop's other detached tasks."""


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


def close_at_loop_end(close: Callable[[], Awaitable[object]]) -> None:
    """`await close()` when the running event loop ends (asyncio cancels every task then;
    trio, its system tasks).

    On asyncio the loop's other detached tasks are cancelled at the same moment, and one
    may be using what `close` closes (a count sent to Redis after an answer, say). They
    are let end first, for at most `_SETTLE` seconds: a connection one of them opened
    after the close would be a socket nobody closes.
    """

    async def closer() -> None:
        me = _current_asyncio_task()
        if me is not None:
            _closers.add(me)
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await _others_ended()
                await close()

    _spawn_detached(closer)


def _current_asyncio_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # trio
        return None


async def _others_ended() -> None:
    """Wait (at most `_SETTLE` s) for this asyncio loop's detached tasks that are not
    closers to end."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio: its system tasks end before the run does
        return
    others = [t for t in _detached if t.get_loop() is loop and not t.done() and t not in _closers]
    if others:
        await asyncio.wait(others, timeout=_SETTLE)


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
        self.draining: set[anyio.CancelScope] = set()
        """The drains of finished calls still holding a connection (`drain_later`): ended
        at once when a call has to wait for one."""

    @property
    def in_use(self) -> int:
        """Requests holding a connection: sent, and their response not yet closed."""
        return sum(self._busy)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        gate = self._gate
        if gate is not None:
            try:
                gate.acquire_nowait()
            except anyio.WouldBlock:
                # A finished call's tail is worth less than a waiting call: its drain ends,
                # its connection closes and its place is this call's.
                for drain in self.draining:
                    drain.cancel()
                await self._wait(gate, request)
        busy = self._busy
        index = busy.index(min(busy))
        pool = self._pools[index] or self._pool(index)
        busy[index] += 1
        try:
            response = await pool.handle_async_request(request)
        except BaseException:
            self._release(index)
            raise
        response.stream = _Releasing(response.stream, self, index)
        return response

    @property
    def connections(self) -> list[Any]:
        """Every httpcore connection of every pool (for tests and debugging)."""
        return [c for p in self._pools if p is not None for c in p._pool.connections]

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
# After the terminal event the rest of the body (a proxy's trailing `data: [DONE]`, the
# chunked-encoding end) is read by a detached task for at most this long and this much, so
# the connection goes back to the pool (`drain_later`); the caller does not wait for it.
_DRAIN_TIMEOUT = 5.0
_DRAIN_LIMIT = 64 * 1024


_ssl_context: ssl.SSLContext | None = None
_trusted = False
"""Whether `_ssl_context` has its certificate authorities loaded (`_load_trust`)."""
_ssl_lock = threading.Lock()


def _client_context() -> ssl.SSLContext:
    """The process's one TLS context for the shared clients, without its trust store yet.

    What `httpx.AsyncClient(verify=True)` builds, less the certificate bundle: loading that
    costs some 250 million instructions (80-170 ms), which a process that only speaks
    `http://` (a local gateway, Ollama) never needs. It is loaded by `_load_trust` before
    the first https request; until then the context verifies against an empty store, so a
    TLS connection made without it fails closed.
    """
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            # `ssl.create_default_context` with no CA loaded (the settings are the same).
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, checks host names
            if sys.version_info >= (3, 13):
                ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
            keylog = os.environ.get("SSLKEYLOGFILE")
            if keylog and not sys.flags.ignore_environment:
                ctx.keylog_filename = keylog
            _ssl_context = ctx
        return _ssl_context


def _load_trust() -> None:
    """Load the certificate authorities into the shared context, once per process.

    The bundle `httpx.create_ssl_context(trust_env=True)` would load: SSL_CERT_FILE or
    SSL_CERT_DIR from the environment, else certifi's. Runs in a worker thread
    (`shared_client_async`; OpenSSL releases the GIL while it reads the bundle).
    """
    global _trusted
    ctx = _client_context()
    with _ssl_lock:
        if _trusted:
            return
        if os.environ.get("SSL_CERT_FILE"):
            ctx.load_verify_locations(cafile=os.environ["SSL_CERT_FILE"])
        elif os.environ.get("SSL_CERT_DIR"):
            ctx.load_verify_locations(capath=os.environ["SSL_CERT_DIR"])
        else:
            import certifi

            ctx.load_verify_locations(cafile=certifi.where())
        _trusted = True


def _prepare_client() -> None:
    """What the process's first client would do on the event loop: import httpcore (and trio,
    where installed: some 100-300 ms) and make the TLS context (`_client_context`)."""
    import httpcore  # noqa: F401 - httpx imports it at the first client: do it here

    _client_context()


def _current(key: object) -> httpx.AsyncClient | None:
    client = _shared.get(key)
    if client is None or client.is_closed or _generation.get(key) != _limits.generation:
        return None
    return client


def _new_client(key: object) -> httpx.AsyncClient:
    limits = shared_limits()
    context = _client_context()
    client = httpx.AsyncClient(timeout=None, limits=limits, verify=context)
    # Swapped in after construction: httpx ignores HTTP(S)_PROXY for a client given a
    # `transport=`, and the proxy transports it makes from them must stay.
    client._transport = PoolTransport(context, limits)
    # A client replaced after `configure_connections` keeps serving its open streams and
    # is closed with its loop, like any other.
    _shared[key] = client
    _generation[key] = _limits.generation
    close_at_loop_end(client.aclose)
    return client


def shared_client() -> httpx.AsyncClient:
    """The keep-alive client that calls without `options.client` share on this event loop.

    One per loop (asyncio loop or trio run), made on first use and closed when the loop
    ends. Timeouts come with each request, so the client has none of its own. Calls take it
    through `shared_client_async`, which loads the TLS trust store off the loop and only
    for https; this synchronous form loads it in place when nothing did before.
    """
    key = _loop_key()
    client = _current(key)
    if client is None:
        client = _new_client(key)
    if not _trusted:
        _load_trust()
    return client


async def shared_client_async(tls: bool = True) -> httpx.AsyncClient:
    """`shared_client()` for a request that needs TLS (`tls`: an https URL, or a proxy on
    the way) or not: the trust store is loaded once per process, in a worker thread, before
    the first request that needs it, and never for `http://` alone. Cancelling the call
    leaves the loading to finish in its thread."""
    key = _loop_key()
    if _ssl_context is None:
        await anyio.to_thread.run_sync(_prepare_client, abandon_on_cancel=True)
    if tls and not _trusted:
        await anyio.to_thread.run_sync(_load_trust, abandon_on_cancel=True)
    client = _current(key)  # another call may have made it while this one waited
    if client is None:
        client = _new_client(key)
    return client


# --- the end of a body --------------------------------------------------------------------


def close_soon(response: httpx.Response | None, chunks: Any, loop: object) -> None:
    """`close_body` for a stream dropped before its end without being closed (from its
    `__del__`): scheduled on `loop` (`run_soon`), so the generators under the body are
    closed, not left to the garbage collector."""
    run_soon(lambda: close_body(response, chunks), loop)


def run_soon(fn: Callable[[], Coroutine[Any, Any, None]], loop: object) -> None:
    """Run `fn()` in a detached task on `loop`, the event loop a stream ran on
    (`_loop_key()`), when it runs in this thread, as trio's own finalizer does: for what a
    stream's `__del__` cannot await. Nothing happens elsewhere (another thread, another
    loop, the interpreter ending)."""

    def spawn() -> None:
        try:
            _spawn_detached(fn)
        except Exception:  # the loop is ending
            pass

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if running is loop:
            running.call_soon(spawn)
        return
    trio: Any = sys.modules.get("trio")
    if trio is None:
        return
    try:
        token = trio.lowlevel.current_trio_token()
        if token == loop:
            token.run_sync_soon(spawn)
    except Exception:  # not in a trio run, or it has finished
        pass


def _pool_of(response: httpx.Response) -> PoolTransport | None:
    """Our transport, when `response` came through it (under httpx's own wrapper)."""
    stream: Any = response.stream
    for _ in range(3):
        if isinstance(stream, _Releasing):
            return stream._transport
        stream = getattr(stream, "_stream", None)
    return None


def drain_later(response: httpx.Response, chunks: Any) -> anyio.Event | None:
    """Read the rest of a body whose terminal event has come, in a detached task, then close
    it; the returned event is set when that is done. None: no task could be started (the
    event loop is ending), and the caller closes the body itself.

    A body that ends within `_DRAIN_LIMIT` bytes and `_DRAIN_TIMEOUT` seconds leaves its
    connection in the pool for the next call; one that is large or never ends is closed,
    and so is one still draining when a call of a full pool waits for a connection.
    The caller does not wait: a proxy that sends its `data: [DONE]` a second later, or
    never, costs it nothing. The task is cancelled (and the body closed) when the event
    loop ends.
    """
    done = anyio.Event()
    owner = _pool_of(response)

    async def drain() -> None:
        scope = anyio.move_on_after(_DRAIN_TIMEOUT)
        try:
            with scope:
                if owner is not None:
                    owner.draining.add(scope)
                left = _DRAIN_LIMIT
                while left >= 0:
                    left -= len(await chunks.__anext__())
        except Exception:  # StopAsyncIteration at the body's end, or a failed read
            pass
        finally:
            if owner is not None:
                owner.draining.discard(scope)
            await close_body(response, chunks)
            done.set()

    try:
        _spawn_detached(drain)
    except Exception:  # the event loop is shutting down: no new task
        return None
    return done
