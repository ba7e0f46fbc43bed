"""A fast loopback Chat Completions vendor for `gateway.py`: the one upstream every side
of the gateway benchmark calls (directly, through stream-core's gateway, through LiteLLM).

    python benchmarks/gateway_vendor.py [--lifetime SECONDS]

Standard library only (it loads nothing a measured process imports), asyncio, its own
process (it shares no GIL with a proxy); listens on 127.0.0.1 with a 4096-deep accept
queue, prints its port as the first line of stdout, stops when its stdin closes (its
parent is gone) or after `--lifetime` seconds. Every request path ends with
`/chat/completions` (a model's base URL is the part before it); the part before that says
what to send, for `"stream": true` and not:

- `/n/N/v1`: N text chunks (`"t0 "`, `"t1 "`, ...) written at once, as OpenAI writes them
  (a role chunk, one chunk per text delta, a `finish_reason` chunk, a usage chunk with
  empty `choices`, `data: [DONE]`), one HTTP chunk per SSE event; not streaming, the
  `chat.completion` object with the same text.
- `/p/N/GAP_MS/v1`: the same stream paced: the role chunk and the first text chunk at
  once, then one event per socket write, GAP_MS apart (a vendor emitting tokens).
- `/h/N/v1`: the role chunk and the first text chunk, then nothing until a request to
  `/go` releases every stream held; then the rest at once. `GET /held` answers how many
  streams are held now.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import threading

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)
_ID = "chatcmpl-bench"
_BATCH = 64  # HTTP chunks per socket write when not paced


def text(n: int) -> str:
    """The answer of an N-chunk stream: what every side must deliver."""
    return "".join(f"t{i} " for i in range(n))


def _chunk(model: str, delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": _ID,
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": model,
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _usage(n: int) -> dict[str, int]:
    return {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": n + 9}


def stream_events(n: int, model: str) -> list[bytes]:
    """The N-chunk stream, each SSE event framed as one HTTP chunk."""
    events: list[object] = [_chunk(model, {"role": "assistant", "content": "", "refusal": None})]
    events += [_chunk(model, {"content": f"t{i} "}) for i in range(n)]
    events.append(_chunk(model, {}, "stop"))
    usage = _chunk(model, {})
    usage["choices"] = []
    usage["usage"] = _usage(n)
    events.append(usage)
    out = []
    for e in events:
        data = b"data: %s\n\n" % json.dumps(e, separators=(",", ":")).encode()
        out.append(b"%x\r\n%s\r\n" % (len(data), data))
    data = b"data: [DONE]\n\n"
    out.append(b"%x\r\n%s\r\n" % (len(data), data))
    return out


def completion(n: int, model: str) -> bytes:
    body = {
        "id": _ID,
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "system_fingerprint": "fp_bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text(n), "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(n),
    }
    data = json.dumps(body, separators=(",", ":")).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(data),
        data,
    )


async def read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """(path, body) of the next request on a keep-alive connection (content-length or
    chunked body); `asyncio.IncompleteReadError` when the client has closed."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length, chunked = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        parts = []
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return lines[0].split(" ")[1], b"".join(parts)
    return lines[0].split(" ")[1], await reader.readexactly(length)


class Vendor:
    def __init__(self) -> None:
        self.streams: dict[tuple[int, str], list[bytes]] = {}
        self.batched: dict[tuple[int, str], list[bytes]] = {}
        self.go = asyncio.Event()
        self.held = 0

    def events(self, n: int, model: str) -> list[bytes]:
        key = (n, model)
        found = self.streams.get(key)
        if found is None:
            found = self.streams[key] = stream_events(n, model)
            b = [b"".join(found[i : i + _BATCH]) for i in range(2, len(found), _BATCH)]
            self.batched[key] = [found[0] + found[1]] + b
        return found

    async def answer(self, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        parts = path.strip("/").split("/")
        if parts[0] == "go":
            go, self.go = self.go, asyncio.Event()
            go.set()
            writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
            return
        if parts[0] == "held":
            data = b"%d" % self.held
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(data), data))
            return
        if not path.endswith("/chat/completions") or parts[0] not in ("n", "p", "h"):
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            return
        try:
            request = json.loads(body)
            model = str(request.get("model", "bench"))
            streaming = request.get("stream") is True
        except (ValueError, AttributeError):
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            return
        n = int(parts[1])
        if not streaming:
            writer.write(completion(n, model))
            return
        events = self.events(n, model)
        writer.write(_HEAD)
        if parts[0] == "n":
            for batch in self.batched[(n, model)]:
                writer.write(batch)
                await writer.drain()
        elif parts[0] == "p":
            gap = float(parts[2]) / 1000
            writer.write(events[0] + events[1])
            for e in events[2:]:
                await writer.drain()
                await asyncio.sleep(gap)
                writer.write(e)
        else:
            writer.write(events[0] + events[1])
            await writer.drain()
            self.held += 1
            try:
                await self.go.wait()
            finally:
                self.held -= 1
            writer.write(b"".join(events[2:]))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                path, body = await read_request(reader)
                await self.answer(path, body, writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except ValueError:
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        finally:
            writer.close()


async def serve(lifetime: float) -> None:
    vendor = Vendor()
    listener = await asyncio.start_server(vendor.handle, "127.0.0.1", 0, backlog=4096)
    print(listener.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(lifetime)


def raise_open_files_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifetime", type=float, default=7200.0)
    args = parser.parse_args()
    raise_open_files_limit()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    asyncio.run(serve(args.lifetime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
