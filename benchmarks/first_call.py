"""The first call of a process: its time to first event, and how long it froze the loop.

    python benchmarks/first_call.py [--backend asyncio|trio] [--runs N] [--json]

Serves a recorded Anthropic stream from a loopback HTTP server (a thread of this process)
and runs each measurement in a fresh interpreter (`--child`), so every call is a process's
first: nothing of stream-core's lazy set-up (providers, catalog, price table, HTTP client,
TLS) is warm. Beside the call a ticker task sleeps 1 ms at a time and records the largest
gap between its wake-ups: what any other task on the loop would have waited. The call is
`stream()` on `anthropic/claude-sonnet-4-5` (a priced model: its cost is computed on the
first usage event), pointed at the loopback server.

Prints, per run: ttft (ms from the call to its first event), total (ms to the final
message), stall (the ticker's largest gap, ms), cost (USD, or None). `--json` prints one
JSON object per run instead; `--complete` calls `complete()` instead of `stream()`. Run it
as an installed package runs: with bytecode caches (an interpreter with
PYTHONDONTWRITEBYTECODE=1 and no `__pycache__` compiles every module it imports, on
whichever thread imports it; `PYTHONPYCACHEPREFIX=/tmp/pyc` and one warm-up run avoid that).
tests/test_event_loop.py runs this with a bound on the stall.
"""

from __future__ import annotations

import argparse
import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

BODY = (
    Path(__file__).resolve().parent.parent
    / "contract_tests/fixtures/anthropic-messages/vercel-ai__anthropic-text.body"
)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def serve() -> tuple[http.server.ThreadingHTTPServer, int]:
    """A loopback server answering every POST with the recorded body; returns its port."""
    _Handler.body = BODY.read_bytes()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def child(port: int, backend: str, use_complete: bool) -> None:
    """One first call, measured; prints its numbers as JSON (runs in a fresh interpreter)."""
    import anyio

    from stream_core import Context, StreamOptions, UserMessage, complete, get_model, stream

    model = get_model("anthropic", "claude-sonnet-4-5").model_copy(
        update={"base_url": f"http://127.0.0.1:{port}"}
    )
    context = Context(messages=[UserMessage(content="hi")])
    result: dict[str, object] = {}

    async def main() -> None:
        stall = 0.0
        done = anyio.Event()

        async def ticker() -> None:
            nonlocal stall
            last = time.perf_counter()
            while not done.is_set():
                await anyio.sleep(0.001)
                now = time.perf_counter()
                stall = max(stall, now - last)
                last = now

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await anyio.sleep(0.01)  # the ticker runs before the call starts
            start = time.perf_counter()
            first = None
            options = StreamOptions(api_key="sk-test")
            if use_complete:
                message = await complete(model, context, options)
            else:
                async with stream(model, context, options) as s:
                    async for _ in s:
                        if first is None:
                            first = time.perf_counter()
                    message = await s.result()
            end = time.perf_counter()
            done.set()
        cost = message.usage.cost
        result.update(
            ttft_ms=round(((first or end) - start) * 1000, 1),
            total_ms=round((end - start) * 1000, 1),
            stall_ms=round(stall * 1000, 1),
            cost=None if cost is None else cost.total,
            error=None if message.error is None else message.error.message,
            text=message.text(),
        )

    anyio.run(main, backend=backend)
    print(json.dumps(result))


def measure(
    port: int, backend: str, *, use_complete: bool = False, env: dict[str, str] | None = None
) -> dict[str, object]:
    """One first call in a fresh interpreter (`env`: its environment)."""
    argv = [sys.executable, __file__, "--child", str(port), "--backend", backend]
    out = subprocess.run(
        [*argv, "--complete"] if use_complete else argv,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--complete", action="store_true", help="call complete() (no ttft) instead of stream()"
    )
    parser.add_argument("--child", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.backend, args.complete)
        return 0
    server, port = serve()
    try:
        for _ in range(args.runs):
            r = measure(port, args.backend, use_complete=args.complete)
            if args.json:
                print(json.dumps(r))
            else:
                print(
                    f"{args.backend}: ttft {r['ttft_ms']} ms, total {r['total_ms']} ms, "
                    f"stall {r['stall_ms']} ms, cost {r['cost']}"
                )
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
