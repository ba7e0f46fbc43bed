"""Many streams in one process: stream-core against the bare loop, same client limits.

    python benchmarks/scale.py [--counts 1 100 1000 5000] [--events 200] [--json]
                               [--min-events 20000] [--repeat K]
                               [--venv DIR [--rebuild] | --python PATH]
    python benchmarks/scale.py --counts 1 --instructions 1 11
    python benchmarks/scale.py --burst [--calls 1000]
    python benchmarks/scale.py --hostile [--calls 1000]

One loopback server (`scale_server.py`, asyncio, another process) and, per (N, side), a
fresh worker process that opens N concurrent streams at once and reads them to the end:

- **bare**: one `httpx.AsyncClient` with the limits of stream-core's shared client
  (`--bare-keepalive N` keeps N idle connections instead),
  `httpx_sse.EventSource(...).aiter_sse()` and `json.loads` per event.
- **stream-core**: `stream_core.stream(...)` with default options (its shared client),
  every event iterated.

Workers import only the standard library and the runtime dependencies (httpx, httpx-sse,
stream-core and what they import), so they can run in a real install: `--venv DIR` builds
one the way `cold_start.py` does (`build_venv`: `uv pip install --compile-bytecode` of this
checkout, no dev group; `--rebuild` after changing stream-core) and runs the workers with
its interpreter; `--python PATH` runs them with any interpreter; by default they run with
the driver's. The server runs in the driver's Python, which needs stream-core (its bodies
are written by the Anthropic codec, `vendor_bytes`).

Scale (the default): streams of `--events` SSE events (one HTTP chunk each) sent in writes
of 50 events. The server sends the first write, and the rest (100 ms apart) once every
stream has had its first event and the worker says so: all N are open at once, each with
the same bytes received. A worker runs that round R times in a row, R = ceil(`--min-events`
/ (N * events)) (at least 1; 100 at N = 1, 1 from N = 100 with the defaults), so a (N,
side) reads at least 20,000 events: one round of one stream is 10-15 ms of CPU, too little
for process CPU time to compare. Every round is like the first (N launched at once, all open
before the rest is sent); connections kept alive are reused by the next round, as by the
warm-up call. RSS is read in the first round (per open stream: its rise over the RSS after
one warm-up call, divided by N); the worker's CPU time (user + system, from the first
round's launch to the last round's last end, summed over the rounds) is divided by the
events read. A stream is ok when it ended without error with every event read.
`--repeat K` runs K workers per (N, side), the sides alternating, and keeps the one with
the least CPU per event (a busy machine only adds CPU time); ok counts every run.

`--instructions FEWER MORE`: instead of CPU time, valgrind cachegrind's count of each
side's worker run for FEWER and for MORE rounds, (I(MORE) - I(FEWER)) / (MORE - FEWER) per
round, which cancels start-up, imports and the warm-up call: the repeatable figure. A
third worker ("gate") runs the rounds without streams: the harness's own per-round work
(the request to `/go`), the same on both sides, shown so it can be taken out.

`--burst`: N calls with default options launched at once, streams of 50 events 100 ms
apart: failures, the p50/p99 time from the launch to each stream's first event, and the
time until every stream has ended.

`--hostile`: N calls launched at once against a server that, per call, answers one of
`scale_server.py`'s hostile behaviours (resets, stalls, junk, 429, 500, or a good short
stream); `idle_timeout` is 3 s and `first_byte_timeout` 10 s (`--first-byte`) so stalls
end, the rest of the options are the defaults. Every stream must
end with exactly one terminal event of the kind its behaviour dictates. stream-core only.

Both processes raise their soft open-file limit to the hard limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_PAGE = os.sysconf("SC_PAGE_SIZE")
_PAYLOAD = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "Hi."}]}

# What each hostile behaviour must end as (None: a good stream).
EXPECTED: dict[str, str | None] = {
    "ok": None,
    "429": "rate_limit",
    "500": "server",
    "reset": "network",
    "reset_early": "network",
    "stall": "timeout",
    "stall_headers": "timeout",
    "junk": "protocol",
}


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _raise_open_files_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --- the worker (a fresh process per side and N) ------------------------------------------


class _Gate:
    """Holds every stream after its first event until all `count` have one."""

    def __init__(self, count: int, hold: bool, url: str = "") -> None:
        self.count, self.hold, self.url = count, hold, url
        self.started = 0
        self.open = asyncio.Event()
        self.rss_open = 0

    async def first(self) -> None:
        self.started += 1
        if self.started == self.count:
            self.rss_open = _rss()
            self.open.set()
            if self.hold:  # the server sends the rest of every stream now
                host, _, port = self.url.split("/")[2].partition(":")
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(b"POST /go HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
                await reader.readuntil(b"\r\n\r\n")
                writer.close()
        if self.hold:
            await self.open.wait()


async def _bare_one(client: Any, url: str, gate: _Gate, t0: float) -> tuple[bool, int, float]:
    from httpx_sse import EventSource

    events, first = 0, 0.0
    try:
        async with client.stream("POST", url, json=_PAYLOAD) as response:
            if response.status_code != 200:
                return False, 0, 0.0
            async for sse in EventSource(response).aiter_sse():
                json.loads(sse.data)
                events += 1
                if events == 1:
                    first = time.perf_counter() - t0
                    await gate.first()
    except Exception:
        return False, events, first
    return True, events, first


_models: dict[str, Any] = {}


async def _core_one(url: str, gate: _Gate, t0: float) -> tuple[bool, int, float]:
    import stream_core
    from stream_core import Context, MessageUpdate, Model, StreamOptions, UserMessage

    # Made once, as the bare side's payload is: a gateway looks its models up.
    if url not in _models:
        _models[url] = Model(id="bench", api="anthropic-messages", provider="bench", base_url=url)
        _models[url + " context"] = Context(messages=[UserMessage(content="Hi.")])
    model, context = _models[url], _models[url + " context"]
    first = 0.0
    updates = 0
    async with stream_core.stream(model, context, StreamOptions(api_key="bench")) as s:
        async for event in s:
            if isinstance(event, MessageUpdate):
                updates += 1
                if updates == 1:
                    first = time.perf_counter() - t0
                    await gate.first()
        message = await s.result()
    # A stream ok is every event the server sent (the path says how many), as on the bare
    # side: updates are not events (text_start and text_end are updates too).
    events = int(url.split("/s/")[1].split("/")[0]) if message.error is None else 0
    return message.error is None, events, first


def _limits() -> Any:
    """The limits of stream-core's shared client, for the bare side (`--bare-keepalive`
    changes its idle connections kept)."""
    import httpx

    from stream_core._transport import shared_limits

    limits = shared_limits()
    keepalive = os.environ.get("SCALE_BARE_KEEPALIVE")
    if keepalive:
        limits = httpx.Limits(
            max_connections=limits.max_connections,
            max_keepalive_connections=int(keepalive),
            keepalive_expiry=limits.keepalive_expiry,
        )
    return limits


async def _worker(side: str, url: str, count: int, hold: bool, rounds: int = 1) -> dict[str, Any]:
    import httpx

    client = httpx.AsyncClient(timeout=None, limits=_limits()) if side == "bare" else None
    warm = _Gate(1, hold, url)
    if side == "gate":  # the harness alone: one /go per round, no stream
        await warm.first()
    elif client is not None:  # one call first: imports and set-up are not per stream
        await _bare_one(client, url, warm, 0.0)
    else:
        await _core_one(url, warm, 0.0)
    rss_base, rss_open = _rss(), 0
    results: list[tuple[bool, int, float]] = []
    usage0, cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), _cpu(), time.perf_counter()
    for round_ in range(rounds):
        # Each round as the first: N launched at once, all open before the rest is sent.
        gate = _Gate(count, hold, url)
        launch = time.perf_counter()
        if side == "gate":
            await gate.first()
            continue
        if client is not None:
            runs = [_bare_one(client, url, gate, launch) for _ in range(count)]
        else:
            runs = [_core_one(url, gate, launch) for _ in range(count)]
        results += await asyncio.gather(*runs)
        if round_ == 0:
            rss_open = gate.rss_open
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    if client is not None:
        await client.aclose()
    firsts = sorted(r[2] for r in results if r[0])
    return {
        "rounds": rounds,
        "ok": sum(r[0] for r in results),
        "events": sum(r[1] for r in results),
        "wall": wall,
        "cpu": cpu,
        "cpu_user": usage.ru_utime - usage0.ru_utime,
        "cpu_sys": usage.ru_stime - usage0.ru_stime,
        "switches": usage.ru_nvcsw + usage.ru_nivcsw - usage0.ru_nvcsw - usage0.ru_nivcsw,
        "rss_base": rss_base,
        "rss_open": rss_open,
        "first_p50": statistics.median(firsts) if firsts else None,
        "first_p99": firsts[min(len(firsts) - 1, int(len(firsts) * 0.99))] if firsts else None,
    }


async def _hostile_worker(
    url: str, count: int, seed: int, first_byte: float = 10.0
) -> dict[str, Any]:
    import stream_core
    from stream_core import Context, Model, StreamOptions, UserMessage

    rng = random.Random(seed)
    behaviours = [rng.choice(list(EXPECTED)) for _ in range(count)]
    context = Context(messages=[UserMessage(content="Hi.")])
    options = StreamOptions(api_key="bench", idle_timeout=3.0, first_byte_timeout=first_byte)

    async def one(behaviour: str) -> str:
        model = Model(
            id="bench", api="anthropic-messages", provider="bench", base_url=f"{url}/h/{behaviour}"
        )
        terminals = []
        async with stream_core.stream(model, context, options) as s:
            async for event in s:
                if event.type in ("message_end", "error"):
                    terminals.append(event)
        if len(terminals) != 1:
            return f"{behaviour}: {len(terminals)} terminal events"
        error = terminals[0].message.error
        got = error.kind if error is not None else None
        if got != EXPECTED[behaviour]:
            return f"{behaviour}: ended {got} ({error.message if error else ''})"
        message = terminals[0].message
        if got is None and (message.stop_reason != "stop" or not message.text()):
            return f"{behaviour}: ended {message.stop_reason} with {message.text()!r}"
        return f"ok {got}"

    cpu0, t0 = _cpu(), time.perf_counter()
    outcomes = await asyncio.gather(*(one(b) for b in behaviours))
    return {
        "calls": count,
        "wall": time.perf_counter() - t0,
        "cpu": _cpu() - cpu0,
        "kinds": dict(Counter(o for o in outcomes if o.startswith("ok "))),
        "wrong": [o for o in outcomes if not o.startswith("ok ")][:20],
        "wrong_count": sum(not o.startswith("ok ") for o in outcomes),
    }


def worker_main(argv: list[str]) -> int:
    _raise_open_files_limit()
    mode, side, url, count = argv[0], argv[1], argv[2], int(argv[3])
    if mode == "hostile":
        out = asyncio.run(_hostile_worker(url, count, int(argv[4]), float(argv[5])))
    else:
        rounds = int(argv[4]) if len(argv) > 4 else 1
        out = asyncio.run(_worker(side, url, count, hold=mode == "scale", rounds=rounds))
    print(json.dumps(out))
    return 0


# --- the driver ---------------------------------------------------------------------------


class Server:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "scale_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


WORKER_PYTHON = sys.executable
"""The interpreter the workers run (`--venv` / `--python`); the driver and the server may
run in any Python."""


def run_worker(*args: object) -> dict[str, Any]:
    out = subprocess.run(
        [WORKER_PYTHON, str(HERE / "scale.py"), "--worker", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def rounds_for(n: int, events: int, min_events: int) -> int:
    """Rounds of N streams so that one (N, side) reads at least `min_events` events."""
    return max(1, -(-min_events // (n * events)))


def _cpu_per_event(run: dict[str, Any]) -> float:
    return float(run["cpu"]) / max(int(run["events"]), 1)


def _scale(
    server: Server, counts: list[int], events: int, min_events: int, repeat: int = 1
) -> list[dict[str, Any]]:
    rows = []
    url = f"{server.url}/s/{events}/100/50/hold"
    for n in counts:
        rounds = rounds_for(n, events, min_events)
        row: dict[str, Any] = {"n": n, "rounds": rounds, "repeat": repeat}
        runs: dict[str, list[dict[str, Any]]] = {"bare": [], "stream-core": []}
        for _ in range(repeat):  # the sides alternate, so a busy spell hits both
            for side, side_runs in runs.items():
                side_runs.append(run_worker("scale", side, url, n, rounds))
        for side, side_runs in runs.items():
            # The least disturbed run (a shared machine only ever adds CPU time); the
            # others' CPU per event is kept beside it.
            row[side] = min(side_runs, key=_cpu_per_event)
            row[side]["cpu_per_event_runs"] = [_cpu_per_event(r) for r in side_runs]
            row[side]["ok_all_runs"] = sum(r["ok"] for r in side_runs)  # failures not hidden
        rows.append(row)
        print(_scale_line(row, events), file=sys.stderr, flush=True)
    return rows


def _instructions(server: Server, n: int, events: int, rounds: tuple[int, int]) -> dict[str, Any]:
    """Instructions (cachegrind) per round of N streams, each side's worker run for `rounds`
    rounds: (I(more) - I(fewer)) / (more - fewer) cancels start-up, imports and warm-up.
    The side "gate" runs the rounds without streams: the harness's own /go request."""
    from cold_start import instructions

    url = f"{server.url}/s/{events}/100/50/hold"
    fewer, more = rounds
    out: dict[str, Any] = {"n": n, "events": events, "rounds": list(rounds)}
    for side in ("gate", "bare", "stream-core"):
        counts = [
            instructions(
                [
                    WORKER_PYTHON,
                    str(HERE / "scale.py"),
                    "--worker",
                    "scale",
                    side,
                    url,
                    str(n),
                    str(r),
                ]
            )
            for r in rounds
        ]
        out[side] = {"instructions": counts, "per_round": (counts[1] - counts[0]) / (more - fewer)}
        print(f"{side}: {out[side]}", file=sys.stderr, flush=True)
    return out


def _instructions_table(r: dict[str, Any]) -> str:
    gate, bare, core = (r[s]["per_round"] for s in ("gate", "bare", "stream-core"))
    per = r["n"] * r["events"]
    lines = [
        "| side | instructions per round | per event | ratio | ratio less the /go request |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| bare | {bare:,.0f} | {bare / per:,.0f} | 1.00x | 1.00x |",
        f"| stream-core | {core:,.0f} | {core / per:,.0f} | {core / bare:.3f}x "
        f"| {(core - gate) / (bare - gate):.3f}x |",
        f"| harness (/go) | {gate:,.0f} | | | |",
    ]
    return "\n".join(lines)


def _scale_line(row: dict[str, Any], events: int) -> str:
    n, bare, core = row["n"], row["bare"], row["stream-core"]
    rounds, repeat = row.get("rounds", 1), row.get("repeat", 1)
    cells = [f"{n:,}", f"{rounds}" if repeat == 1 else f"{rounds} x {repeat}"]
    for side in (bare, core):
        cells.append(f"{side.get('ok_all_runs', side['ok']):,}/{n * rounds * repeat:,}")
    for side in (bare, core):
        cells.append(f"{side['events'] / side['wall']:,.0f}")
    cpm = [side["cpu"] / max(side["events"], 1) * 1e6 for side in (bare, core)]
    cells += [f"{cpm[0]:.1f}", f"{cpm[1]:.1f}", f"{cpm[1] / cpm[0]:.2f}x"]
    for side in (bare, core):
        cells.append(f"{(side['rss_open'] - side['rss_base']) / n / 1024:.1f}")
    return "| " + " | ".join(cells) + " |"


SCALE_HEAD = (
    "| N | rounds | ok bare | ok stream-core | events/s bare | events/s stream-core "
    "| CPU s / M events bare | stream-core | ratio | KB per open stream bare | stream-core |\n"
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 100, 1000, 5000])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument(
        "--min-events",
        type=int,
        default=20000,
        help="events each (N, side) reads at least: N streams are run in rounds",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="workers per (N, side), sides alternating; the least CPU per event is kept",
    )
    parser.add_argument(
        "--instructions",
        type=int,
        nargs=2,
        metavar=("FEWER", "MORE"),
        help="instructions (cachegrind) per round at each --counts N: worker runs of FEWER "
        "and MORE rounds",
    )
    parser.add_argument("--venv", type=Path, help="workers run this venv's interpreter")
    parser.add_argument("--rebuild", action="store_true", help="build --venv afresh")
    parser.add_argument("--python", type=Path, help="workers run this interpreter")
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first-byte", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--bare-keepalive", type=int, default=None)
    args = parser.parse_args(argv)
    if args.bare_keepalive is not None:
        os.environ["SCALE_BARE_KEEPALIVE"] = str(args.bare_keepalive)
    global WORKER_PYTHON
    if args.python is not None:
        WORKER_PYTHON = str(args.python)
    elif args.venv is not None:
        from cold_start import build_venv

        WORKER_PYTHON = str(build_venv(args.venv, args.rebuild))
    print(f"workers: {WORKER_PYTHON}", file=sys.stderr, flush=True)
    _raise_open_files_limit()
    server = Server()
    try:
        if args.hostile:
            out: Any = run_worker(
                "hostile", "stream-core", server.url, args.calls, args.seed, args.first_byte
            )
            print(json.dumps(out, indent=1))
            return 0 if out["wrong_count"] == 0 else 1
        if args.burst:
            url = f"{server.url}/s/50/100/1"
            out = {
                side: run_worker("burst", side, url, args.calls) for side in ("bare", "stream-core")
            }
            if args.json:
                print(json.dumps(out, indent=1))
            else:
                print(
                    "| side | ok | p50 first event (s) | p99 first event (s) | all done (s) "
                    "| CPU (s) |"
                )
                print("| --- | ---: | ---: | ---: | ---: | ---: |")
                for side, r in out.items():
                    print(
                        f"| {side} | {r['ok']:,}/{args.calls:,} | {r['first_p50']:.2f} "
                        f"| {r['first_p99']:.2f} | {r['wall']:.1f} | {r['cpu']:.1f} |"
                    )
                ratio = out["stream-core"]["first_p99"] / out["bare"]["first_p99"]
                print(f"\np99 first event, stream-core / bare: {ratio:.2f}x")
            return 0
        if args.instructions:
            fewer, more = sorted(args.instructions)
            results = [_instructions(server, n, args.events, (fewer, more)) for n in args.counts]
            if args.json:
                print(json.dumps(results, indent=1))
            else:
                for r in results:
                    print(f"N = {r['n']}, rounds {fewer} and {more}:\n")
                    print(_instructions_table(r))
            return 0
        rows = _scale(server, args.counts, args.events, args.min_events, args.repeat)
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            print(SCALE_HEAD)
            for row in rows:
                print(_scale_line(row, args.events))
        return 0
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
