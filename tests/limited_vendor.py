"""A fake vendor that enforces rate limits the way the real ones say they do, on loopback.

Speaks OpenAI Chat Completions (streamed, usage in the last chunk) with OpenAI's
`x-ratelimit-*` headers (resets as Go durations), or Anthropic Messages with
`anthropic-ratelimit-*` headers (RFC 3339 resets) with `fmt="anthropic"`. Fixed windows
of `window` seconds: each request counts one against `requests` and its prompt tokens plus
`max_tokens` against `tokens` when it arrives (as OpenAI counts), settled to the tokens it
really used when it ends. A request over either limit gets a 429 with `retry-after` (and
the headers). With `headers=False` no rate-limit headers are sent, and `concurrency` caps
requests in flight instead (429 past it). Prompt tokens are counted as the vendor's own
tokenizer would: one per 4 characters of message text, plus 4 a message.

Used by tests/test_limits.py (in a thread: `LimitedVendor(...).start()`) and by
benchmarks/limits.py (a process of its own: `python tests/limited_vendor.py --port 0 ...`,
which prints its URL, and `GET /stats`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import threading
import time
from datetime import UTC, datetime
from typing import Any


class LimitedVendor:
    def __init__(
        self,
        *,
        requests: int | None = None,
        tokens: int | None = None,
        window: float = 1.0,
        output_tokens: int = 20,
        fmt: str = "openai",
        headers: bool = True,
        concurrency: int | None = None,
        delay: float = 0.0,
        retry_after: bool = True,
    ) -> None:
        self.requests, self.tokens, self.window = requests, tokens, window
        self.output_tokens, self.fmt, self.headers = output_tokens, fmt, headers
        self.concurrency, self.delay, self.retry_after = concurrency, delay, retry_after
        self.windows: dict[int, dict[str, int]] = {}
        """Per window index: admitted requests, tokens (settled), 429s."""
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrivals: list[float] = []
        self.statuses: list[int] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._ready = threading.Event()

    # --- accounting ---------------------------------------------------------------------

    def _stats(self, index: int) -> dict[str, int]:
        return self.windows.setdefault(index, {"requests": 0, "tokens": 0, "429": 0})

    def _headers(self, w: dict[str, int], index: int, now: float) -> list[tuple[str, str]]:
        if not self.headers:
            return []
        reset = (index + 1) * self.window
        out: list[tuple[str, str]] = []
        for name, limit, used in (
            ("requests", self.requests, w["requests"]),
            ("tokens", self.tokens, w["tokens"]),
        ):
            if limit is None:
                continue
            left = max(0, limit - used)
            if self.fmt == "anthropic":
                at = datetime.fromtimestamp(math.ceil(reset), UTC).isoformat()
                out += [
                    (f"anthropic-ratelimit-{name}-limit", str(limit)),
                    (f"anthropic-ratelimit-{name}-remaining", str(left)),
                    (f"anthropic-ratelimit-{name}-reset", at.replace("+00:00", "Z")),
                ]
            else:
                wait = max(reset - now, 0.0)
                out += [
                    (f"x-ratelimit-limit-{name}", str(limit)),
                    (f"x-ratelimit-remaining-{name}", str(left)),
                    (f"x-ratelimit-reset-{name}", f"{int(wait * 1000)}ms"),
                ]
        return out

    # --- HTTP ---------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if head.startswith(b"GET /stats"):
                    payload = json.dumps(self.report()).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(payload), payload)
                    )
                    await writer.drain()
                    continue
                await self._answer(json.loads(body or b"{}"), writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def _prompt_tokens(self, payload: dict[str, Any]) -> int:
        total = 0
        messages = list(payload.get("messages", []))
        system = payload.get("system")
        if system:
            messages.append({"content": system})
        for m in messages:
            content = m.get("content")
            text = json.dumps(content) if not isinstance(content, str) else content
            total += 4 + (len(text) + 3) // 4
        return total

    async def _answer(self, payload: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        now = time.time()
        self.arrivals.append(now)
        index = int(now // self.window)
        w = self._stats(index)
        prompt = self._prompt_tokens(payload)
        max_out = int(payload.get("max_tokens") or payload.get("max_completion_tokens") or 0)
        charge = prompt + max_out
        over = (self.requests is not None and w["requests"] + 1 > self.requests) or (
            self.tokens is not None and w["tokens"] + charge > self.tokens
        )
        if self.concurrency is not None and self.in_flight >= self.concurrency:
            over = True
        if over:
            w["429"] += 1
            self.statuses.append(429)
            headers = self._headers(w, index, now)
            if self.retry_after:
                wait = (index + 1) * self.window - now
                headers.append(("retry-after-ms", str(max(1, int(wait * 1000)))))
            body = b'{"error":{"type":"rate_limit_error","message":"Rate limit reached"}}'
            writer.write(
                b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers)
                + b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            return
        self.statuses.append(200)
        w["requests"] += 1
        w["tokens"] += charge
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            head = (
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + b"".join(f"{k}: {v}\r\n".encode() for k, v in self._headers(w, index, now))
                + b"transfer-encoding: chunked\r\n\r\n"
            )
            writer.write(head)
            out = min(self.output_tokens, max_out) if max_out else self.output_tokens
            if self.delay:
                await asyncio.sleep(self.delay)
            for event in self._events(prompt, out):
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            # Settled to what it used, in the window it was counted in.
            w["tokens"] += prompt + out - charge
        finally:
            self.in_flight -= 1

    def _events(self, prompt: int, out: int) -> list[bytes]:
        text = "x" * out * 4
        if self.fmt == "anthropic":
            return [
                b"event: message_start\ndata: "
                + json.dumps(
                    {
                        "type": "message_start",
                        "message": {"id": "m", "model": "m", "usage": {"input_tokens": prompt}},
                    }
                ).encode()
                + b"\n\n",
                b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
                b'"content_block":{"type":"text","text":""}}\n\n',
                b"event: content_block_delta\ndata: "
                + json.dumps(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": text},
                    }
                ).encode()
                + b"\n\n",
                b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
                b"event: message_delta\ndata: "
                + json.dumps(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": out},
                    }
                ).encode()
                + b"\n\n",
                b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
            ]
        chunks = [
            {"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
            {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {
                "id": "c",
                "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": out},
            },
        ]
        return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [
            b"data: [DONE]\n\n"
        ]

    def report(self) -> dict[str, Any]:
        return {
            "windows": {str(k): v for k, v in sorted(self.windows.items())},
            "max_in_flight": self.max_in_flight,
            "requests": self.requests,
            "tokens": self.tokens,
            "window": self.window,
        }

    # --- life ---------------------------------------------------------------------------

    async def serve(self, port: int = 0) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._server.serve_forever()

    def start(self) -> LimitedVendor:
        """Serve from a thread of its own; returns once listening."""
        thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        thread.start()
        self._ready.wait(10)
        return self

    async def _run(self) -> None:
        try:
            await self.serve()
        except asyncio.CancelledError:
            pass

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("" if self.fmt == "anthropic" else "/v1")

    def over(self) -> list[tuple[int, dict[str, int]]]:
        """Windows where more was admitted than the limits allow."""
        return [
            (k, w)
            for k, w in self.windows.items()
            if (self.requests is not None and w["requests"] > self.requests)
            or (self.tokens is not None and w["tokens"] > self.tokens)
        ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--requests", type=int)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--output-tokens", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--format", default="openai")
    args = parser.parse_args()
    vendor = LimitedVendor(
        requests=args.requests,
        tokens=args.tokens,
        window=args.window,
        output_tokens=args.output_tokens,
        delay=args.delay,
        fmt=args.format,
    )

    async def run() -> None:
        task = asyncio.create_task(vendor.serve(args.port))
        while not vendor.port:
            await asyncio.sleep(0.01)
        print(vendor.url, flush=True)
        await task

    asyncio.run(run())


if __name__ == "__main__":
    main()
