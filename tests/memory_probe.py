"""One call against a loopback server in this process, then its peak RSS (CONTRACT 5).

Run as `python tests/memory_probe.py CASE API [MAX_EVENT_BYTES [BACKEND]]`; prints one JSON line:
the error kind and message, the text that arrived, and the peak RSS before and after the
call (MB). The server is a thread with a plain socket: it writes a prepared head and then
its body piece by piece, never holding more than a piece of it.

Cases:
- `bomb-error`: a 500 in `content-encoding: gzip, gzip`, 1.8 KB inflating to 1 GB.
- `bomb-error-1`: a 500 in one layer of gzip inflating to 1 GB (1 MB on the wire).
- `bomb-stream`: the stream's media type, gzip, one line that inflates to 1 GB.
- `bomb-stream-2`: the same in `gzip, gzip`.
- `bomb-json`: a 200 `application/json` in gzip inflating to 1 GB.
- `long-line`: the first half of the text case, then 300 MB without a newline.
"""

from __future__ import annotations

import json
import resource
import socket
import sys
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import anyio

import stream_core
from stream_core.contract_tests.kit import framing, options, text_case

GB = 1024**3
PIECE = 64 * 1024


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _gzip_stream(
    size: int, fill: bytes = b"x", prefix: bytes = b"", layers: int = 1
) -> Iterator[bytes]:
    """`layers` of gzip over `prefix` + `size` x `fill`, made as the server sends it (a
    client that stops early costs the server no more)."""
    zs = [zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16) for _ in range(layers)]

    def through(data: bytes, final: bool = False) -> bytes:
        for z in zs:
            data = z.compress(data) + (z.flush() if final else b"")
        return data

    block = fill * (1024 * 1024)
    pending = [through(prefix)]
    for _ in range(size // len(block)):
        pending.append(through(block))
        if sum(map(len, pending)) >= PIECE:
            yield b"".join(pending)
            pending = []
    pending.append(through(b"", final=True))
    yield b"".join(pending)


def _long_tail(media: str) -> bytes:
    """The start of a line/frame that never ends, in this framing."""
    if media == "application/vnd.amazon.eventstream":
        prelude = (12 * 1024 * 1024).to_bytes(4, "big") + (0).to_bytes(4, "big")
        return prelude + zlib.crc32(prelude).to_bytes(4, "big")
    if media == "text/event-stream":
        return b'data: {"x": "'
    return b'{"x": "'


def _head(api: str) -> bytes:
    frames = framing(api).frames(text_case(api).body)
    return b"".join(frames[: max(3, len(frames) // 2)])


def _plan(case: str, api: str) -> tuple[bytes, Iterator[bytes]]:
    media = framing(api).media_type
    if case in ("bomb-error", "bomb-error-1"):
        layers = 2 if case == "bomb-error" else 1
        coding = b"gzip, gzip" if layers == 2 else b"gzip"
        head = b"HTTP/1.1 500 Internal Server Error\r\ncontent-encoding: " + coding + b"\r\n"
        return head + b"content-type: application/json\r\n", _gzip_stream(GB, b"\0", layers=layers)
    if case in ("bomb-stream", "bomb-stream-2"):
        layers = 2 if case == "bomb-stream-2" else 1
        coding = b"gzip, gzip" if layers == 2 else b"gzip"
        body = _gzip_stream(GB, b"x", _head(api) + _long_tail(media), layers)
        head = b"HTTP/1.1 200 OK\r\ncontent-encoding: " + coding + b"\r\n"
        return head + b"content-type: " + media.encode() + b"\r\n", body
    if case == "bomb-json":
        head = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\n"
        body = _gzip_stream(GB, b" ", b'{"x": 1')
        return head + b"content-type: application/json\r\n", body
    if case == "long-line":

        def pieces() -> Iterator[bytes]:
            yield _head(api) + _long_tail(media)
            block = b"y" * PIECE
            for _ in range(300 * 1024 * 1024 // PIECE):
                yield block

        return b"HTTP/1.1 200 OK\r\ncontent-type: " + media.encode() + b"\r\n", pieces()
    raise SystemExit(f"unknown case {case}")


def _serve(listener: socket.socket, head: bytes, body: Iterator[bytes]) -> None:
    conn, _ = listener.accept()
    with conn:
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(65536)
        try:
            conn.sendall(head + b"connection: close\r\ntransfer-encoding: chunked\r\n\r\n")
            for piece in body:
                conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the client hung up: what it should do at its cap


async def _call(api: str, port: int, cap: int | None) -> stream_core.AssistantMessage:
    model = stream_core.Model(
        id="m", api=api, provider="loopback", base_url=f"http://127.0.0.1:{port}"
    )
    ctx = {"messages": [{"role": "user", "content": "hi"}]}
    extra: dict[str, Any] = {} if cap is None else {"max_event_bytes": cap}
    async with stream_core.stream(model, ctx, options(idle_timeout=60, **extra)) as s:
        return await s.result()


def main() -> None:
    case, api = sys.argv[1], sys.argv[2]
    cap = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    backend = sys.argv[4] if len(sys.argv) > 4 else "asyncio"
    head, body = _plan(case, api)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=_serve, args=(listener, head, body), daemon=True).start()
    before = _peak_mb()
    message = anyio.run(_call, api, port, cap, backend=backend)
    error = message.error
    text = "".join(getattr(b, "text", "") or getattr(b, "thinking", "") for b in message.content)
    print(
        json.dumps(
            {
                "kind": error.kind if error else None,
                "message": (error.message if error else "")[:300],
                "text": text[:200],
                "rss_before_mb": round(before, 1),
                "rss_peak_mb": round(_peak_mb(), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
