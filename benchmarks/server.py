"""A loopback SSE server for the socket and per-call benchmarks: one HTTP chunk per event.

    python benchmarks/server.py DIR [--lifetime SECONDS] [--idle SECONDS]

Serves the file `DIR/NAME.sse` to any request whose path starts with `/NAME/`, as a
`text/event-stream` in `transfer-encoding: chunked` with one HTTP chunk per SSE event (what
the vendors' servers do), keeping connections alive. A body in AWS's binary event-stream
framing (Bedrock; recognised by its prelude CRC) goes out one message per HTTP chunk, as
`application/vnd.amazon.eventstream`; newline-delimited JSON (Ollama) one line per chunk.
It listens on 127.0.0.1 only and prints its port as the first line of stdout. It stops when
its stdin closes (its parent is gone), after `--lifetime` seconds in all, or after `--idle`
seconds without a request.
Standard library only, so it loads nothing the measured side imports.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import threading
import zlib
from pathlib import Path

_BATCH = 64  # HTTP chunks per socket write: keeps this process's CPU share small


def is_event_stream(data: bytes) -> bool:
    return len(data) >= 12 and zlib.crc32(data[:8]) == struct.unpack_from(">I", data, 8)[0]


def frame(data: bytes) -> list[bytes]:
    """The body cut into its events (SSE events, or event-stream messages), each framed as
    one HTTP chunk, batched per write."""
    if is_event_stream(data):
        events, pos = [], 0
        while pos + 12 <= len(data):
            total = struct.unpack_from(">I", data, pos)[0]
            events.append(data[pos : pos + total])
            pos += total
    elif data.startswith(b"{"):  # newline-delimited JSON (Ollama): one line per event
        events = [line + b"\n" for line in data.split(b"\n") if line]
    else:
        events = [e + b"\n\n" for e in data.split(b"\n\n") if e]
    chunks = [b"%x\r\n%s\r\n" % (len(e), e) for e in events]
    return [b"".join(chunks[i : i + _BATCH]) for i in range(0, len(chunks), _BATCH)]


async def read_request(reader: asyncio.StreamReader) -> str:
    """The path of the next request on a keep-alive connection; its body is read and
    dropped. `asyncio.IncompleteReadError` when the client has closed the connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return lines[0].split(" ")[1]


class Server:
    def __init__(self, folder: Path, idle: float) -> None:
        self.folder = folder
        self.bodies: dict[str, tuple[bytes, list[bytes]]] = {}
        self.idle = idle
        self.last = 0.0

    def body(self, path: str) -> tuple[bytes, list[bytes]] | None:
        """(content type, HTTP chunks) of the body named by the path's first segment."""
        name = path.lstrip("/").split("/", 1)[0]
        if name not in self.bodies:
            file = self.folder / f"{name}.sse"
            if "." in name or not file.is_file():
                return None
            data = file.read_bytes()
            if is_event_stream(data):
                media = b"application/vnd.amazon.eventstream"
            elif data.startswith(b"{"):
                media = b"application/x-ndjson"
            else:
                media = b"text/event-stream"
            self.bodies[name] = (media, frame(data))
        return self.bodies[name]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                path = await read_request(reader)
                self.last = loop.time()
                found = self.body(path)
                if found is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    continue
                media, body = found
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: " + media + b"\r\n"
                    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                for batch in body:
                    writer.write(batch)
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def watch_idle(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        self.last = loop.time()
        while loop.time() - self.last < self.idle:
            await asyncio.sleep(1.0)
        stop.set()


async def serve(folder: Path, lifetime: float, idle: float) -> None:
    server = Server(folder, idle)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    print(port, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(lifetime, stop.set)
    watcher = asyncio.create_task(server.watch_idle(stop))
    async with listener:
        await stop.wait()
    watcher.cancel()


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--lifetime", type=float, default=3600.0)
    parser.add_argument("--idle", type=float, default=600.0)
    args = parser.parse_args()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    asyncio.run(serve(args.folder, args.lifetime, args.idle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
