"""Per-call overhead: sequential short calls over a loopback socket, the first call apart.

    python benchmarks/percall.py [--calls 30] [--size 20] [--repeat 3] [--json]
    python benchmarks/percall.py --worker SIDE PROVIDER URL [--calls N]

Each side runs in a fresh process that makes `--calls` calls, one after the other, to
benchmarks/server.py (127.0.0.1, one HTTP chunk per SSE event) for a short text stream of
`--size` deltas. Per call it records the time from the call (`client.stream(...)` /
`stream_core.stream(...)`) to the first event read from the body, and to the end.

- **bare**: one `httpx.AsyncClient` reused for every call, `EventSource(...).aiter_sse()` and
  `json.loads` per event. The first event is the first SSE event.
- **stream-core**: `stream_core.stream(model, context, options)` with no client given (so its
  shared keep-alive client), every event iterated. The first event is the first
  `message_update` (`message_start` is emitted before any I/O).
- **new-client**: stream-core given a new `httpx.AsyncClient` per call (closed after): what
  every call paid before clients were shared.
- **route**: stream-core through a `Route` of two deployments whose first serves every
  call: the routing layer's own cost (issue 25: at most 2% over **stream-core**).
- **no-limits**: stream-core with `configure_limits(enabled=False)`: the limiter's own
  cost is **stream-core** less this (issue 26: at most 20 us a call in-process).

The first call is reported apart, with the process's import and set-up time (from the
first line of the worker to the first call). Calls 2..N are summarized by their median.
The server's own time is in both sides alike (it answers at once), so the difference is the
client's. Instruction counts of the same workers: `benchmarks/cachegrind.py --mode percall`.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before any import the worker measures

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

SIDES = ("bare", "stream-core", "new-client", "route", "no-limits")
PROVIDERS = ("anthropic-messages", "openai-completions")
TARGET = 2.0  # stream-core / bare, time to first event, calls 2..N
_PAYLOAD = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "Hi."}]}


# --- the worker (a fresh process per side) ------------------------------------------------


async def _bare(url: str, calls: int) -> tuple[float, list[tuple[float, float]]]:
    import httpx
    from httpx_sse import EventSource

    client = httpx.AsyncClient(timeout=None)
    ready = time.perf_counter()
    out = []
    try:
        for _ in range(calls):
            start = time.perf_counter()
            first = 0.0
            async with client.stream("POST", url + "/bench", json=_PAYLOAD) as response:
                async for sse in EventSource(response).aiter_sse():
                    if not first:
                        first = time.perf_counter()
                    if sse.data != "[DONE]":
                        json.loads(sse.data)
            out.append((first - start, time.perf_counter() - start))
    finally:
        await client.aclose()
    return ready, out


async def _core(
    side: str, provider: str, url: str, calls: int
) -> tuple[float, list[tuple[float, float]]]:
    import httpx

    import stream_core
    from stream_core import Context, MessageUpdate, Model, StreamOptions, UserMessage

    model = Model(id="bench", api=provider, provider="bench", base_url=url)
    target: Any = model
    if side == "no-limits":
        stream_core.configure_limits(enabled=False)
    if side == "route":
        spare = Model(id="bench", api=provider, provider="spare", base_url="http://127.0.0.2:9")
        target = stream_core.Route([model, spare])
    context = Context(messages=[UserMessage(content="Hi.")])
    ready = time.perf_counter()
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        first = 0.0
        client = httpx.AsyncClient(timeout=None) if side == "new-client" else None
        options = StreamOptions(api_key="bench", max_retries=0, client=client)
        async with stream_core.stream(target, context, options) as s:
            async for event in s:
                if not first and isinstance(event, MessageUpdate):
                    first = time.perf_counter()
            message = await s.result()
        if client is not None:
            await client.aclose()
        assert message.error is None and message.text(), message.error
        out.append((first - start, time.perf_counter() - start))
    return ready, out


def worker(side: str, provider: str, url: str, calls: int) -> dict[str, Any]:
    if side == "bare":
        ready, timings = asyncio.run(_bare(url, calls))
    else:
        ready, timings = asyncio.run(_core(side, provider, url, calls))
    rss_kb = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):  # not getrusage: Linux keeps that across exec
            rss_kb = int(line.split()[1])
    return {"setup_s": ready - _T0, "calls": timings, "rss_kb": rss_kb}


# --- the driver ---------------------------------------------------------------------------


def run_worker(side: str, provider: str, url: str, calls: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", side, provider, url, "--calls", str(calls)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def summarize(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over the runs: set-up, first call, and the median of calls 2..N."""
    med = statistics.median
    return {
        "setup_ms": med(r["setup_s"] for r in runs) * 1e3,
        "first_ttfe_ms": med(r["calls"][0][0] for r in runs) * 1e3,
        "first_total_ms": med(r["calls"][0][1] for r in runs) * 1e3,
        "ttfe_us": med(med(c[0] for c in r["calls"][1:]) for r in runs) * 1e6,
        "total_us": med(med(c[1] for c in r["calls"][1:]) for r in runs) * 1e6,
        "rss_mib": med(r["rss_kb"] for r in runs) / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--size", type=int, default=20, help="text deltas per response")
    parser.add_argument("--repeat", type=int, default=3, help="worker processes per side")
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", nargs=3, metavar=("SIDE", "PROVIDER", "URL"))
    args = parser.parse_args(argv)
    if args.worker:
        side, provider, url = args.worker
        print(json.dumps(worker(side, provider, url, args.calls)))
        return 0
    if args.calls < 2:
        parser.error("--calls needs at least 2 (the first call is reported apart)")

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run as bench

    results: dict[str, dict[str, dict[str, float]]] = {}
    with bench.Loopback() as server:
        for provider in args.providers:
            body = bench.make_body(provider, "text", args.size)
            name = f"percall-{provider}"
            server.add(name, body.data)
            url = server.base_url(name)
            runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
            for _ in range(args.repeat):
                for side in SIDES:  # interleaved, so a slow spell hits every side
                    runs[side].append(run_worker(side, provider, url, args.calls))
            results[provider] = {side: summarize(r) for side, r in runs.items()}
            if not args.json:
                print(f"  measured {provider}", file=sys.stderr)
    if args.json:
        print(json.dumps({"calls": args.calls, "size": args.size, "results": results}, indent=2))
        return 0
    print(
        f"{args.calls} sequential calls of {args.size} text deltas over a loopback socket; "
        f"median of {args.repeat} processes. ttfe = call to first event read from the body."
    )
    head = (
        f"{'provider':<19} {'side':<12} {'import+setup ms':>15} {'1st ttfe ms':>11} "
        f"{'1st total ms':>12} {'2..N ttfe µs':>13} {'2..N total µs':>14} {'RSS MiB':>8}"
    )
    print(head)
    print("-" * len(head))
    for provider, by_side in results.items():
        for side, r in by_side.items():
            print(
                f"{provider:<19} {side:<12} {r['setup_ms']:>15.1f} {r['first_ttfe_ms']:>11.2f} "
                f"{r['first_total_ms']:>12.2f} {r['ttfe_us']:>13.0f} {r['total_us']:>14.0f} "
                f"{r['rss_mib']:>8.1f}"
            )
    print()
    print(f"calls 2..N, stream-core / bare (target <= {TARGET}x for time to first event)")
    for provider, by_side in results.items():
        bare, core, new = by_side["bare"], by_side["stream-core"], by_side["new-client"]
        ratio = core["ttfe_us"] / bare["ttfe_us"]
        print(
            f"{provider:<19} ttfe {ratio:.2f}x {'ok' if ratio <= TARGET else 'MISS'}, "
            f"total {core['total_us'] / bare['total_us']:.2f}x; "
            f"a new client per call: ttfe {new['ttfe_us'] / bare['ttfe_us']:.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
