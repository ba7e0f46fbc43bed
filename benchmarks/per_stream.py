"""Python-heap bytes per open stream, over a loopback socket: stream-core beside the bare loop.

    python benchmarks/per_stream.py [--streams 200] [--python PATH]

`scale_server.py` (another process) holds N streams open after their first write; each
side, in a fresh process of its own, opens N at once after one warm-up call, and
tracemalloc counts what the N open streams hold once each has had its first events (the
same bytes received on both sides). For stream-core it then lists the allocation sites
(file:line) that hold the most, the library's own and pydantic's, so the share that is
ours can be read off. `--python` runs the sides with another interpreter (a real install,
e.g. the venv `cold_start.py` builds).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_PAYLOAD = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "Hi."}]}
_OURS = ("stream_core", "pydantic")


def _worker(side: str, url: str, count: int) -> None:
    import asyncio
    import gc
    import json
    import tracemalloc

    async def release() -> None:
        host, _, port = url.split("/")[2].partition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /go HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    async def main() -> None:
        import httpx

        started = asyncio.Semaphore(0)
        if side == "bare":
            from httpx_sse import EventSource

            limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
            client = httpx.AsyncClient(timeout=None, limits=limits)

            async def one(u: str) -> None:
                async with client.stream("POST", u, json=_PAYLOAD) as response:
                    n = 0
                    async for sse in EventSource(response).aiter_sse():
                        json.loads(sse.data)
                        n += 1
                        if n == 3:
                            started.release()

        else:
            from stream_core import Context, Model, StreamOptions, UserMessage, stream

            context = Context(messages=[UserMessage(content="Hi.")])
            options = StreamOptions(api_key="bench", max_retries=0)
            models = {
                u: Model(id="bench", api="anthropic-messages", provider="bench", base_url=u)
                for u in (url, url.replace("/hold", ""))
            }

            async def one(u: str) -> None:
                async with stream(models[u], context, options) as s:
                    n = 0
                    async for _event in s:
                        n += 1
                        if n == 3:
                            started.release()

        warm = asyncio.create_task(one(url.replace("/hold", "")))
        await started.acquire()
        await warm
        gc.collect()
        tracemalloc.start(1)
        base = tracemalloc.get_traced_memory()[0]
        tasks = [asyncio.create_task(one(url)) for _ in range(count)]
        for _ in range(count):
            await started.acquire()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        print(f"{side}: {held / count / 1024:.1f} KB per open stream ({count} streams)")
        if side == "stream-core":
            sites = tracemalloc.take_snapshot().statistics("lineno")
            for stat in sites[:40]:
                frame = stat.traceback[0]
                where = frame.filename.split("site-packages/")[-1]
                if any(part in where for part in _OURS) and stat.size / count >= 100:
                    print(f"  {stat.size / count:6.0f} B  {where}:{frame.lineno}")
        await release()
        await asyncio.gather(*tasks)

    asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        side, url, count = args.worker
        _worker(side, url, int(count))
        return 0
    server = subprocess.Popen(
        [sys.executable, str(HERE / "scale_server.py"), "--lifetime", "600"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/s/20/10/3/hold"
        for side in ("bare", "stream-core"):
            subprocess.run(
                [args.python, __file__, "--worker", side, url, str(args.streams)], check=True
            )
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
