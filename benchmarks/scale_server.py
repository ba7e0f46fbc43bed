"""A loopback server for many concurrent streams, and for hostile bursts.

    python benchmarks/scale_server.py [--lifetime SECONDS]

Asyncio, so one process holds thousands of sockets; it listens on 127.0.0.1 with a
4096-deep accept queue and prints its port as the first line of stdout. It stops when its
stdin closes (its parent is gone) or after `--lifetime` seconds. Every body is an Anthropic
Messages stream written by the Anthropic codec (`stream_core.testing.vendor_bytes`, errors
by the dialect's `error_body`), made once per size, the first before it listens (so its
imports are paid before any stream). The request path says what to send:

- `/s/EVENTS/GAP_MS/PER_WRITE/...`: a stream of EVENTS SSE events (5 of framing, the rest
  text deltas), one HTTP chunk per event, PER_WRITE chunks per socket write, GAP_MS
  between writes (the first write at once). `/s/EVENTS/GAP_MS/PER_WRITE/hold/...` sends
  the first write, then waits for a request to `/go` (which releases every stream held).
- `/h/BEHAVIOUR/...`: one hostile behaviour, the same on every attempt of a call:
  `ok` (a short stream), `429` (with `retry-after: 0`), `500`, `reset` (the connection
  closed with RST mid-stream, after some text), `reset_early` (RST before any answer),
  `stall` (headers and some text, then silence), `stall_headers` (no answer at all),
  `junk` (status 200, `text/event-stream`, random bytes, then the end of the body).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import socket
import struct
import sys
import threading
from http import HTTPStatus

from server import read_request  # benchmarks/, this script's own folder

from stream_core import ErrorKind, Usage
from stream_core.provider import dialect
from stream_core.testing import FauxTurn, faux_text, vendor_bytes

API = "anthropic-messages"
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def stream_events(count: int) -> list[bytes]:
    """`count` events (at least 6) of one Anthropic text stream, each an HTTP chunk: the
    bytes `vendor_bytes` writes (the Anthropic codec's) for a text of `count - 5` deltas."""
    deltas = max(count - 5, 1)
    first, *rest = faux_text("", usage=Usage(input=3, output=deltas)).frames
    pieces = [{**first, "text": "word0 "}]
    pieces += [{"b": first["b"], "text": f"word{i % 10} "} for i in range(1, deltas)]
    body = vendor_bytes(FauxTurn(frames=(*pieces, *rest)), API, model="bench").body
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
    return [b"%x\r\n%s\r\n" % (len(e), e) for e in events]


_bodies: dict[int, list[bytes]] = {}


def _error(kind: ErrorKind, extra: bytes) -> bytes:
    """An HTTP error of `kind` as Anthropic answers it (the dialect's `error_body`)."""
    status, error = dialect(API).error_body(kind, "hostile")
    body = json.dumps(error).encode()
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:  # Anthropic's 529
        phrase = "Overloaded"
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n" % (status, phrase.encode())
        + extra
        + b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:  # SO_LINGER 0: close() sends RST
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _hostile(behaviour: str, writer: asyncio.StreamWriter) -> bool:
    """Answer one request; False when the connection is gone."""
    short = _bodies.setdefault(12, stream_events(12))
    if behaviour == "ok":
        writer.write(_HEAD + b"".join(short) + b"0\r\n\r\n")
    elif behaviour == "429":
        writer.write(_error("rate_limit", b"retry-after: 0\r\n"))
    elif behaviour == "500":
        writer.write(_error("server", b""))
    elif behaviour == "reset":
        writer.write(_HEAD + b"".join(short[:4]))
        await writer.drain()
        await asyncio.sleep(0.05)
        _reset(writer)
        return False
    elif behaviour == "reset_early":
        _reset(writer)
        return False
    elif behaviour == "stall":
        writer.write(_HEAD + b"".join(short[:4]))
        await writer.drain()
        await asyncio.sleep(3600)
    elif behaviour == "stall_headers":
        await asyncio.sleep(3600)
    elif behaviour == "junk":
        junk = bytes(random.getrandbits(8) for _ in range(300)).replace(b"\n", b"?")
        writer.write(_HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(junk), junk))
    else:
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
    await writer.drain()
    return True


_go = asyncio.Event()


async def _stream(
    events: int, gap: float, per_write: int, hold: bool, writer: asyncio.StreamWriter
) -> None:
    chunks = _bodies.get(events)
    if chunks is None:
        chunks = _bodies[events] = stream_events(events)
    writer.write(_HEAD)
    for i in range(0, len(chunks), per_write):
        if i == per_write and hold:
            await _go.wait()
        elif i:
            await asyncio.sleep(gap)
        writer.write(b"".join(chunks[i : i + per_write]))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            parts = (await read_request(reader)).strip("/").split("/")
            if parts[0] == "s" and len(parts) >= 4:
                hold = len(parts) > 4 and parts[4] == "hold"
                await _stream(int(parts[1]), int(parts[2]) / 1000, int(parts[3]), hold, writer)
            elif parts[0] == "go":
                global _go
                _go.set()
                _go = asyncio.Event()
                writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
            elif parts[0] == "h" and len(parts) >= 2:
                if not await _hostile(parts[1], writer):
                    return
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def serve(lifetime: float) -> None:
    _bodies.setdefault(12, stream_events(12))  # the codec's imports, before any stream
    listener = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(listener.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(lifetime)


def raise_open_files_limit() -> None:
    """Thousands of sockets need more than the usual soft limit of 1024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifetime", type=float, default=3600.0)
    args = parser.parse_args()
    raise_open_files_limit()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    asyncio.run(serve(args.lifetime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
