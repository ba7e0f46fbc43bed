"""The load generator of `gateway.py`: a minimal HTTP/1.1 client on asyncio streams.

Standard library only, one kept-alive connection per concurrent worker, so what it costs
is the same whichever side it calls (the vendor directly, or a proxy in front of it). A
request's latency is timed from just before its bytes are written to the last byte of the
answer; its time to first byte, to the first byte of the body (the first chunk of a
streamed answer).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Result:
    ok: bool
    status: int = 0
    ttfb: float = 0.0
    total: float = 0.0
    body: bytes = b""
    error: str = ""


@dataclass
class Target:
    """One side's endpoint: where to send, which body, what a good answer ends with."""

    name: str
    port: int
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"

    def request(self, body: bytes) -> bytes:
        lines = [f"POST {self.path} HTTP/1.1", f"host: {self.host}:{self.port}"]
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def send(
        self, raw: bytes, keep: bool, on_first: Callable[[], None] | None = None
    ) -> Result:
        """One request on this connection (opened, or re-opened, as needed); `on_first` is
        called when the first byte of the body arrives."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, limit=1 << 20
            )
        reader, writer = self.reader, self.writer
        assert reader is not None
        began = time.perf_counter()
        writer.write(raw)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        length, chunked, close = -1, False, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and b"close" in value.lower():
                close = True
        parts: list[bytes] = []
        ttfb = 0.0
        if chunked:
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                if not ttfb:
                    ttfb = time.perf_counter() - began
                    if on_first is not None:
                        on_first()
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b""):
                        pass
                    break
                data = await reader.readexactly(size + 2)
                if keep:
                    parts.append(data[:-2])
                else:  # the end is enough to check the stream's terminator
                    parts = [data[-64:-2]]
        elif length >= 0:
            data = await reader.readexactly(length)
            ttfb = time.perf_counter() - began
            parts.append(data)
        else:
            data = await reader.read()
            ttfb = time.perf_counter() - began
            parts.append(data)
            close = True
        total = time.perf_counter() - began
        if close:
            await self.close()
        return Result(True, status, ttfb, total, b"".join(parts))


def sse_text(body: bytes, dialect: str) -> str:
    """The text an SSE answer of `dialect` delivers ("chat" or "anthropic")."""
    out = []
    for event in body.split(b"\n\n"):
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                continue
            obj = json.loads(data)
            if dialect == "chat":
                for choice in obj.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        out.append(piece)
            elif obj.get("type") == "content_block_delta":
                delta = obj.get("delta") or {}
                if delta.get("type") == "text_delta":
                    out.append(delta["text"])
    return "".join(out)


def json_text(body: bytes, dialect: str) -> str:
    obj = json.loads(body)
    if dialect == "chat":
        return str(obj["choices"][0]["message"]["content"])
    return "".join(b.get("text", "") for b in obj["content"] if b.get("type") == "text")


def finished(body: bytes, dialect: str, streaming: bool) -> bool:
    """Whether an answer's bytes end the way a complete answer of `dialect` ends."""
    if not streaming:
        return body.endswith(b"}")
    tail = body.rstrip()
    if dialect == "chat":
        return tail.endswith(b"[DONE]")
    return b"message_stop" in tail


async def one(conn: Connection, raw: bytes, keep: bool, timeout: float) -> Result:
    try:
        return await asyncio.wait_for(conn.send(raw, keep), timeout)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as e:
        await conn.close()
        return Result(False, error=type(e).__name__)


async def load(
    target: Target,
    body: bytes,
    concurrency: int,
    total: int,
    warmup: int,
    timeout: float = 60.0,
    keep: bool = False,
) -> list[Result]:
    """`total` requests, `concurrency` at a time in a closed loop, after `warmup` requests
    per worker (not returned), each worker on its own kept-alive connection."""
    raw = target.request(body)
    conns = [Connection(target.host, target.port) for _ in range(concurrency)]
    results: list[Result] = []
    left, warm = total, 0
    all_warm = asyncio.Event()

    async def worker(conn: Connection) -> None:
        nonlocal left, warm
        for _ in range(warmup):
            r = await one(conn, raw, False, timeout)
            if not r.ok:
                await one(conn, raw, False, timeout)  # a kept-alive connection the server closed
        warm += 1
        if warm == concurrency:
            all_warm.set()
        await all_warm.wait()
        while left > 0:
            left -= 1
            results.append(await one(conn, raw, keep, timeout))

    await asyncio.gather(*(worker(c) for c in conns))
    for c in conns:
        await c.close()
    return results


async def get(port: int, path: str, timeout: float = 10.0) -> Result:
    conn = Connection("127.0.0.1", port)
    raw = f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode()
    try:
        return await one(conn, raw, True, timeout)
    finally:
        await conn.close()
