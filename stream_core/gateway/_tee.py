"""The gateway's HTTP client for same-dialect calls: the upstream's own bytes, teed.

A same-dialect call (`_passthrough`) still goes through `stream()` (routes, retries,
quotas, budgets, usage, OpenTelemetry), with `StreamOptions.client` set to the client this
module makes (`gateway_client`: one per event loop, shared, pooled). Its transport hands
the body of every response it receives, as it is read, to the `Tee` of the exchange that
sent the request (a context variable, set by the exchange around its call). Each response
is one `Attempt`; a newer attempt replaces the older (a retry, a route falling over), so a
failed attempt's bytes never reach the client. Once the exchange commits (the first
content), the attempt it serves is fixed, and any later request's bytes are not kept.

The pools are split in `_SHARDS`, each request going to the least busy one, for the same
reason the library splits its shared client's (httpcore's pool examines every connection
each time a request arrives or ends: one pool of a thousand streams costs O(N^2)).
Environment proxies are kept (httpx makes their transports; they are wrapped too).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
import weakref
from contextvars import ContextVar
from typing import Any

import anyio
import httpx

from .._transport import close_at_loop_end

__all__ = ["Attempt", "FrameCheck", "Tee", "current", "gateway_client"]

_SHARDS = 16
_KEEPALIVE = 256
"""Idle connections kept for reuse, in all (split between the shards), as the library's
shared client keeps."""
_KEEPALIVE_EXPIRY = 30.0

current: ContextVar[Tee | None] = ContextVar("stream_core_gateway_tee", default=None)
"""The tee of the exchange whose call is running in this task (None: bytes not kept)."""

_FRAME_END = (b"\n\n", b"\r\n\r\n", b"\r\r")


def _frame_end(buffer: bytearray) -> int:
    """Where the last complete SSE frame in `buffer` ends (0: none yet)."""
    if buffer.endswith(b"\n\n"):  # a read that ends with its last event: the usual case
        return len(buffer)
    end = 0
    for sep in _FRAME_END:
        at = buffer.rfind(sep)
        if at >= 0 and at + len(sep) > end:
            end = at + len(sep)
    return end


class Attempt:
    """One response of an upstream: its status, headers and the body bytes not yet
    taken. `ended` is set once its body is over (read to its end, closed, or failed);
    `eof`: read to its end."""

    __slots__ = ("encoded", "ended", "eof", "headers", "live", "pending", "status")

    def __init__(self) -> None:
        self.status = 0
        self.headers: httpx.Headers = httpx.Headers()
        self.encoded = False
        """The body is content-encoded (gzip ...): forwarded as it came, with its header."""
        self.pending = bytearray()
        self.live = True
        self.eof = False
        self.ended = anyio.Event()

    def answered(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.headers = headers = response.headers
        coding = headers.get("content-encoding", "").strip().lower()
        self.encoded = coding not in ("", "identity")

    @property
    def media(self) -> str:
        media: str = self.headers.get("content-type", "")
        return media.partition(";")[0].strip().lower()

    def body(self) -> bytes:
        """Everything received and not taken, taken now."""
        out = bytes(self.pending)
        self.pending.clear()
        return out


class Tee:
    """One exchange's view of its upstream calls (see the module's docstring).

    `headers`: request headers to set (a value) or remove (None) on every upstream
    request, over what the request builder wrote; those in `if_written` are set only
    where the builder wrote one. `drop_usage_chunk`: a Chat Completions
    stream asked for usage for the gateway's own accounting: the usage-only chunk is not
    forwarded (the client did not ask for it). `check`: the frames of a stream that may
    reach the client (see `FrameCheck`; None: every frame)."""

    __slots__ = ("check", "committed", "current", "drop_usage_chunk", "headers", "if_written")

    def __init__(
        self,
        headers: dict[str, str | None],
        if_written: frozenset[str] = frozenset(),
        drop_usage_chunk: bool = False,
        check: FrameCheck | None = None,
    ) -> None:
        self.headers = headers
        self.if_written = if_written
        self.drop_usage_chunk = drop_usage_chunk
        self.check = check
        self.current: Attempt | None = None
        self.committed = False

    def begin(self, request: httpx.Request) -> Attempt | None:
        """A request is going out: its headers set, and its response's attempt (None once
        committed: the client already has another attempt's bytes)."""
        written = request.headers
        for name, value in self.headers.items():
            if value is None:
                if name in written:
                    del written[name]
            elif name not in self.if_written or name in written:
                written[name] = value
        if self.committed:
            return None
        old = self.current
        if old is not None:
            old.live = False
            old.pending.clear()
        attempt = self.current = Attempt()
        return attempt

    def take(self, *, whole: bool = False) -> bytes:
        """The serving attempt's bytes to send now: its complete frames (a frame cut by the
        end of a read waits for its rest), or everything (`whole`, at the end)."""
        attempt = self.current
        if attempt is None or not attempt.pending:
            return b""
        buffer = attempt.pending
        encoded = attempt.encoded
        if whole or encoded:
            out = bytes(buffer)
            buffer.clear()
        else:
            end = _frame_end(buffer)
            if end == 0:
                return b""
            if end == len(buffer):
                out = bytes(buffer)
                buffer.clear()
            else:
                out = bytes(buffer[:end])
                del buffer[:end]
        if self.drop_usage_chunk and not encoded:
            out = _without_usage_chunk(out)
        if self.check is not None and not encoded:
            out = self.check.sound(out)
        return out


_LINES = re.compile(r"\r\n|\r|\n")
_FIRSTS = {
    "anthropic-messages": frozenset({"message_start", "error"}),
    "openai-responses": frozenset({"response.created", "error", "response.failed"}),
}
_INDEXES = ("index", "output_index", "content_index", "summary_index", "sequence_number")
"""Fields an SDK indexes its accumulated answer by: whole numbers, or it cannot read on."""
_OBJECTS = {
    "anthropic-messages": {
        "message_start": ("message",),
        "content_block_start": ("index", "content_block"),
        "content_block_delta": ("index", "delta"),
        "content_block_stop": ("index",),
        "message_delta": ("delta",),
    },
    "openai-responses": {
        "response.created": ("response",),
        "response.output_item.added": ("output_index", "item"),
        "response.output_item.done": ("output_index", "item"),
        "response.content_part.added": ("output_index", "content_index", "part"),
    },
}
"""Per event type, the fields an SDK reads it by (an object, or an index: `_INDEXES`)."""
_TERMINALS = {
    "anthropic-messages": frozenset({"message_stop", "error"}),
    "openai-responses": frozenset(
        {"response.completed", "response.incomplete", "response.failed", "response.done"}
    ),
}


class FrameCheck:
    """Which of an upstream's SSE frames reach a client of the same dialect: each one that
    is sound (UTF-8, only SSE fields, its data a JSON object: of the `type` its event
    names in Anthropic's and OpenAI Responses' streams; with its `choices`, or `[DONE]`,
    or an error, in a Chat Completions stream), up to the first terminal event. A junk
    line, a frame cut by a dropped connection or a second terminal would break the
    client's SDK, and it is not content: left out. A stream that does not open with its
    dialect's first event (`message_start`, `response.created`) cannot be read by an SDK
    at all: `broken`, nothing more of it goes out. `ended`: a terminal went out;
    `sequence`: the last Responses `sequence_number` that did."""

    __slots__ = ("api", "blocks", "broken", "ended", "sequence", "started")

    def __init__(self, api: str) -> None:
        self.api = api
        self.ended = False
        self.broken = False
        self.started = False
        self.sequence = -1
        self.blocks = 0
        """Anthropic: the content blocks started (an SDK indexes its blocks by them)."""

    def sound(self, out: bytes) -> bytes:
        """The frames of `out` that may go to the client."""
        kept = []
        for match in _FRAMES.finditer(out):
            if self.ended or self.broken:
                break
            frame = match.group()
            if self._sound(frame):
                kept.append(frame)
        return b"".join(kept)

    def _sound(self, frame: bytes) -> bool:
        try:
            text = frame.decode()
        except UnicodeDecodeError:
            return False
        event, data = None, []
        for line in _LINES.split(text):
            if not line or line[0] == ":":
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value[:1] == " " else value
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name not in ("id", "retry"):
                return False
        if not data:
            return event is None  # a comment or a keep-alive; an event needs its data
        payload = "\n".join(data)
        chat = self.api not in _TERMINALS
        if chat and payload == "[DONE]":
            self.ended = True
            return True
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return False
        if type(obj) is not dict:
            return False
        if chat:
            if isinstance(obj.get("error"), dict):
                self.ended = True
                return True
            return self._choices(obj.get("choices"))
        kind = obj.get("type")
        if type(kind) is not str or (event is not None and event != kind):
            return False
        if not _shaped(obj, _OBJECTS[self.api].get(kind, ())) or not self._in_order(kind, obj):
            self.broken = True
            return False
        if not self.started:
            self.started = True
            if kind not in _FIRSTS[self.api]:
                self.broken = True
                return False
        number = obj.get("sequence_number")
        if type(number) is int:
            self.sequence = number
        if kind in _TERMINALS[self.api]:
            self.ended = True
        return True

    def _in_order(self, kind: str, obj: dict[str, Any]) -> bool:
        """Anthropic: a block's events name a block started before (its start, the next)."""
        if self.api != "anthropic-messages" or not kind.startswith("content_block_"):
            return True
        index: int = obj["index"]
        if kind == "content_block_start":
            if index > self.blocks:
                return False
            self.blocks = max(self.blocks, index + 1)
            return True
        return index < self.blocks

    def _choices(self, choices: Any) -> bool:
        """A Chat Completions chunk's `choices` as an SDK accumulates them (by index);
        anything else breaks the stream."""
        if type(choices) is not list:
            return False
        for choice in choices:
            if type(choice) is not dict or not _index(choice.get("index", 0)):
                self.broken = True
                return False
            delta = choice.get("delta")
            calls = delta.get("tool_calls") if type(delta) is dict else None
            if (delta is not None and type(delta) is not dict) or (
                calls is not None
                and (
                    type(calls) is not list
                    or any(type(c) is not dict or not _index(c.get("index", 0)) for c in calls)
                )
            ):
                self.broken = True
                return False
        return True


_EMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')
_FRAMES = re.compile(rb"(?s).*?(?:\r\n\r\n|\n\n|\r\r)|.+\Z")


def _without_usage_chunk(out: bytes) -> bytes:
    """`out` less the Chat Completions chunks that carry only usage (no choices), which a
    stream sends when `stream_options.include_usage` is set."""
    if _EMPTY_CHOICES.search(out) is None:
        return out
    kept = []
    for match in _FRAMES.finditer(out):
        frame = match.group()
        if _EMPTY_CHOICES.search(frame) is not None and _usage_only(frame):
            continue
        kept.append(frame)
    return b"".join(kept)


def _usage_only(frame: bytes) -> bool:
    data = b"".join(line[5:].lstrip() for line in frame.splitlines() if line.startswith(b"data:"))
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(chunk, dict)
        and chunk.get("choices") == []
        and isinstance(chunk.get("usage"), dict)
    )


def _index(value: Any) -> bool:
    return type(value) is int and 0 <= value < _MOST


_MOST = 1 << 31
"""An index past this is no list's."""


def _shaped(obj: dict[str, Any], needed: tuple[str, ...]) -> bool:
    """Whether an event has the fields an SDK reads it by (`_OBJECTS`), and whole numbers
    for every index it has."""
    for key in needed:
        if key not in _INDEXES and type(obj.get(key)) is not dict:
            return False
        if key in _INDEXES and key not in obj:
            return False
    return all(_index(obj[key]) for key in _INDEXES if key in obj)


class _Body(httpx.AsyncByteStream):
    """A response body read through: each piece handed to its attempt as it is read;
    closing it gives its shard's place back."""

    __slots__ = ("_attempt", "_index", "_open", "_stream", "_transport")

    def __init__(
        self, stream: Any, attempt: Attempt | None, transport: _Transport, index: int
    ) -> None:
        self._stream = stream  # `_stream`: the library finds the connection under it by name
        self._attempt = attempt
        self._transport = transport
        self._index = index
        self._open = True

    def __aiter__(self) -> Any:
        if self._attempt is None:
            return self._stream.__aiter__()
        return self._teed(self._attempt)

    async def _teed(self, attempt: Attempt) -> Any:
        pending = attempt.pending
        try:
            async for piece in self._stream:
                if attempt.live:
                    pending += piece
                yield piece
            attempt.eof = True
        finally:
            attempt.ended.set()

    async def aclose(self) -> None:
        if not self._open:
            return
        self._open = False
        try:
            await self._stream.aclose()
        finally:
            self._transport.release(self._index)
            if self._attempt is not None:
                self._attempt.ended.set()


class _Transport(httpx.AsyncBaseTransport):
    """Requests go to the least busy of its pools; responses are teed (`Tee.begin`)."""

    def __init__(self, make: Any, shards: int) -> None:
        self._make = make
        self._pools: list[httpx.AsyncBaseTransport | None] = [None] * shards
        self._busy = [0] * shards

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        tee = current.get()
        attempt = tee.begin(request) if tee is not None else None
        busy = self._busy
        index = busy.index(min(busy))
        pool = self._pools[index]
        if pool is None:
            pool = self._pools[index] = self._make()
        busy[index] += 1
        try:
            response = await pool.handle_async_request(request)
        except BaseException:
            self.release(index)
            if attempt is not None:
                attempt.ended.set()
            raise
        if attempt is not None:
            attempt.answered(response)
        response.stream = _Body(response.stream, attempt, self, index)
        return response

    def release(self, index: int) -> None:
        self._busy[index] -= 1

    async def aclose(self) -> None:
        for pool in self._pools:
            if pool is not None:
                await pool.aclose()


_context: ssl.SSLContext | None = None
_context_lock = threading.Lock()


def _tls() -> ssl.SSLContext:
    """One TLS context for the process (httpx's default trust: SSL_CERT_FILE, SSL_CERT_DIR
    or certifi), made once, in a worker thread: loading the bundle takes some 100 ms."""
    global _context
    with _context_lock:
        if _context is None:
            _context = httpx.create_ssl_context()
        return _context


_clients: weakref.WeakKeyDictionary[object, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def _loop_key() -> object:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        import trio

        return trio.lowlevel.current_trio_token()


async def gateway_client() -> httpx.AsyncClient:
    """The client same-dialect calls share on this event loop, made on first use and
    closed when the loop ends."""
    key = _loop_key()
    client = _clients.get(key)
    if client is not None and not client.is_closed:
        return client
    context = _context if _context is not None else await anyio.to_thread.run_sync(_tls)
    client = _clients.get(key)  # another call may have made it while this one waited
    if client is not None and not client.is_closed:
        return client
    limits = httpx.Limits(
        max_connections=None,
        max_keepalive_connections=-(-_KEEPALIVE // _SHARDS),
        keepalive_expiry=_KEEPALIVE_EXPIRY,
    )
    client = httpx.AsyncClient(timeout=None, verify=context, limits=limits)
    # Swapped in after construction: httpx ignores HTTP(S)_PROXY for a client given a
    # `transport=`, and the proxy transports it made from them must stay (teed too).
    client._transport = _Transport(
        lambda: httpx.AsyncHTTPTransport(verify=context, limits=limits), _SHARDS
    )
    client._mounts = {
        pattern: None if t is None else _Transport(lambda t=t: t, 1)
        for pattern, t in client._mounts.items()
    }
    _clients[key] = client
    close_at_loop_end(client.aclose)  # closed as its loop ends
    return client
