"""Instructions per event under valgrind's cachegrind: the noise-free version of run.py.

    python benchmarks/cachegrind.py [--mode inprocess|socket] [--sizes 5000 20000]
                                    [--only text|tool] [--jobs N] [--json]
    python benchmarks/cachegrind.py --mode percall [--calls 30] [--jobs N] [--json]

Wall-clock time on a shared machine swings by tens of percent; an instruction count does
not. Each (provider, stream, side) is replayed once by `run.py --single` in its own process
under `valgrind --tool=cachegrind --cache-sim=no`, at a small and a large size, and

    instructions per event = (I(large) - I(small)) / (events(large) - events(small))

so interpreter start-up, imports and first-call costs cancel. Bodies are generated here and
handed over as files, so generating them is not counted either. `--mode socket` reads them
from benchmarks/server.py over a loopback socket instead (the server is not counted).

`--mode percall` counts benchmarks/percall.py workers making 0, 1 and N+1 calls:
set-up = I(0), first call = I(1) - I(0), each later call = (I(N+1) - I(1)) / N.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import run as bench  # benchmarks/run.py: a script's own directory is on sys.path

RUN = Path(__file__).resolve().parent / "run.py"
_I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


@dataclass(frozen=True)
class Job:
    provider: str
    kind: str
    side: str
    size: int
    body: Path
    events: int
    url: str | None = None
    """Socket mode: the server's base URL for this body (then `body` is unused)."""
    calls: int | None = None
    """Per-call mode: calls the worker makes (then `size` is unused)."""


PERCALL = Path(__file__).resolve().parent / "percall.py"


def _single_cmd(job: Job) -> list[str]:
    if job.calls is not None:
        assert job.url is not None
        return [
            sys.executable,
            str(PERCALL),
            "--worker",
            job.side,
            job.provider,
            job.url,
            "--calls",
            str(job.calls),
        ]
    where = ["--body", str(job.body)]
    if job.url:
        where = ["--url", job.url, "--events", str(job.events)]
    return [
        sys.executable,
        str(RUN),
        "--single",
        job.provider,
        job.kind,
        job.side,
        str(job.size),
        *where,
    ]


def _env() -> dict[str, str]:
    # A fixed hash seed keeps dict/set layouts, and so the counts, the same run to run.
    return {**os.environ, "PYTHONHASHSEED": "0"}


def _check_single(job: Job, stdout: str) -> None:
    out = json.loads(stdout.strip().splitlines()[-1])
    if job.calls is not None:
        if len(out["calls"]) != job.calls:
            raise RuntimeError(f"{job}: worker made {len(out['calls'])} calls")
        return
    got = out["events"]
    if got != job.events:
        raise RuntimeError(f"{job}: replay saw {got} events, body has {job.events}")


def instructions(job: Job) -> int:
    cmd = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        *_single_cmd(job),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    _check_single(job, proc.stdout)
    found = _I_REFS.findall(proc.stderr)
    if not found:
        raise RuntimeError(f"no 'I refs' line in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(found[-1].replace(",", ""))


@dataclass
class Row:
    provider: str
    kind: str
    events: int
    """Events(large) - events(small): the denominator."""
    bare: float
    core: float

    @property
    def ratio(self) -> float:
        return self.core / self.bare


def _mark(ratio: float, target: float) -> str:
    return "ok" if ratio <= target else "MISS"


def print_tables(rows: list[Row], small: int, large: int) -> None:
    print(
        f"instructions per SSE event = (I({large}) - I({small})) / Δevents; "
        f"ratio = stream-core / bare (target <= {bench.TEXT_TARGET}x)"
    )
    head = (
        f"{'provider':<19} {'stream':<6} {'Δevents':>8} {'bare instr/ev':>14} "
        f"{'stream-core instr/ev':>21} {'ratio':>7}  target"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.provider:<19} {r.kind:<6} {r.events:>8} {r.bare:>14,.0f} {r.core:>21,.0f} "
            f"{r.ratio:>6.2f}x  {_mark(r.ratio, bench.TEXT_TARGET)}"
        )
    pairs = _pairs(rows)
    if not pairs:
        return
    print()
    print(
        f"stream-core tool stream / text stream, instructions per event "
        f"(target <= {bench.TOOL_TARGET}x)"
    )
    head = (
        f"{'provider':<19} {'text instr/ev':>14} {'tool instr/ev':>14} {'tool/text':>10}"
        f"  target  {'(bare tool/text)':>16}"
    )
    print(head)
    print("-" * len(head))
    for text, tool in pairs:
        ratio = tool.core / text.core
        print(
            f"{text.provider:<19} {text.core:>14,.0f} {tool.core:>14,.0f} {ratio:>9.2f}x  "
            f"{_mark(ratio, bench.TOOL_TARGET):<6}  {tool.bare / text.bare:>15.2f}x"
        )


def _pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    tools = {r.provider: r for r in rows if r.kind == "tool"}
    return [(r, tools[r.provider]) for r in rows if r.kind == "text" and r.provider in tools]


def _run_all(jobs: list[Job], n_jobs: int) -> dict[Job, int]:
    # One plain run each: catches a broken replay in seconds, and writes any missing
    # .pyc files so no counted run pays for compiling.
    for job in jobs:
        proc = subprocess.run(
            _single_cmd(job), capture_output=True, text=True, env=_env(), check=True
        )
        _check_single(job, proc.stdout)
    started = time.monotonic()
    counts: dict[Job, int] = {}

    def count(job: Job) -> None:
        counts[job] = instructions(job)
        what = f"{job.calls} calls" if job.calls is not None else f"{job.kind} {job.size}"
        print(
            f"  [{time.monotonic() - started:5.0f}s] {job.provider} {job.side} {what}: "
            f"{counts[job]:,} instructions",
            file=sys.stderr,
        )

    with ThreadPoolExecutor(max_workers=max(1, n_jobs)) as pool:
        list(pool.map(count, jobs))
    return counts


def main_percall(args: argparse.Namespace) -> int:
    import percall

    sides = (
        ("bare", "stream-core")
        + (("route",) if args.route else ())
        + (("no-limits",) if args.limits else ())
    )
    n = args.calls
    with bench.Loopback() as server:
        jobs: list[Job] = []
        for provider in args.providers:
            name = f"percall-{provider}"
            server.add(name, bench.make_body(provider, "text", 20).data)
            url = server.base_url(name)
            jobs += [
                Job(provider, "text", side, 0, Path(), 0, url, calls)
                for side in sides
                for calls in (0, 1, n + 1)
            ]
        counts = _run_all(jobs, args.jobs)

    def count(provider: str, side: str, calls: int) -> int:
        return counts[
            next(j for j in jobs if (j.provider, j.side, j.calls) == (provider, side, calls))
        ]

    rows = []
    for provider in args.providers:
        for side in sides:
            setup = count(provider, side, 0)
            first = count(provider, side, 1) - setup
            each = (count(provider, side, n + 1) - count(provider, side, 1)) / n
            rows.append(
                {
                    "provider": provider,
                    "side": side,
                    "setup_instructions": setup,
                    "first_call_instructions": first,
                    "per_call_instructions": each,
                }
            )
    if args.json:
        print(json.dumps({"calls": n, "rows": rows}, indent=2))
        return 0
    print(
        f"instructions per call, {n} calls after the first: (I({n + 1} calls) - I(1)) / {n}; "
        f"first call = I(1) - I(0); set-up = I(0) (interpreter start and imports)"
    )
    head = f"{'provider':<19} {'side':<12} {'set-up':>15} {'first call':>14} {'per later call':>15}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['provider']:<19} {r['side']:<12} {r['setup_instructions']:>15,} "
            f"{r['first_call_instructions']:>14,} {r['per_call_instructions']:>15,.0f}"
        )
    print()
    for provider in args.providers:
        bare, core = (
            next(r for r in rows if (r["provider"], r["side"]) == (provider, side))
            for side in ("bare", "stream-core")
        )
        ratio = core["per_call_instructions"] / bare["per_call_instructions"]
        print(
            f"{provider:<19} per later call, stream-core / bare: {ratio:.2f}x "
            f"(target <= {percall.TARGET}x)"
        )
        if args.limits:
            off = next(r for r in rows if (r["provider"], r["side"]) == (provider, "no-limits"))
            cost = core["per_call_instructions"] - off["per_call_instructions"]
            print(
                f"{provider:<19} per later call, the limiter (stream-core - no-limits): "
                f"{cost:,.0f} instructions"
            )
        if args.route:
            route = next(r for r in rows if (r["provider"], r["side"]) == (provider, "route"))
            extra = route["per_call_instructions"] / core["per_call_instructions"]
            print(
                f"{provider:<19} per later call, route / stream-core: {extra:.3f}x"
                " (target <= 1.02x)"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode",
        choices=("inprocess", "socket", "percall"),
        default="inprocess",
        help="what to count (default: in-process)",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs=2,
        default=[5000, 20000],
        metavar=("SMALL", "LARGE"),
        help="deltas per stream, two sizes",
    )
    parser.add_argument("--calls", type=int, default=30, help="percall: calls after the first")
    parser.add_argument(
        "--route", action="store_true", help="percall: also count calls through a Route"
    )
    parser.add_argument(
        "--limits",
        action="store_true",
        help="percall: also count calls with the limiter off (its cost per call)",
    )
    parser.add_argument("--only", choices=bench.KINDS, help="run one stream kind")
    parser.add_argument(
        "--providers", nargs="+", choices=bench.PROVIDERS, default=list(bench.PROVIDERS)
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="valgrind processes at once (counts do not depend on it)",
    )
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=bench.SIDES,
        default=list(bench.SIDES),
        help="count these sides only (one side prints its counts, no ratio)",
    )
    args = parser.parse_args(argv)

    if shutil.which("valgrind") is None:
        print(
            "valgrind is not installed, so there is nothing to count; install it "
            "(e.g. `apt-get install valgrind`) and run again. Skipping."
        )
        return 0
    if args.mode == "percall":
        return main_percall(args)
    small, large = sorted(args.sizes)
    if small == large:
        parser.error("--sizes needs two different sizes")
    kinds = [args.only] if args.only else list(bench.KINDS)

    with tempfile.TemporaryDirectory(prefix="stream-core-bench-") as tmp:
        server = bench.Loopback(folder=Path(tmp)) if args.mode == "socket" else None
        try:
            jobs: list[Job] = []
            for provider in args.providers:
                for kind in bench.kinds_for(provider, kinds):
                    for size in (small, large):
                        body = bench.make_body(provider, kind, size)
                        name = bench.body_name(body)
                        path = Path(tmp) / f"{name}.sse"
                        path.write_bytes(body.data)
                        url = server.base_url(name) if server is not None else None
                        jobs += [
                            Job(provider, kind, side, size, path, body.events, url)
                            for side in bench.SIDES
                            if side in args.sides
                        ]
            counts = _run_all(jobs, args.jobs)
        finally:
            if server is not None:
                server.close()

    def per_event(provider: str, kind: str, side: str) -> tuple[float, int]:
        lo, hi = (
            next(
                j
                for j in jobs
                if (j.provider, j.kind, j.side, j.size) == (provider, kind, side, size)
            )
            for size in (small, large)
        )
        events = hi.events - lo.events
        return (counts[hi] - counts[lo]) / events, events

    if len(args.sides) == 1:  # one side's counts only, e.g. to re-count stream-core alone
        for provider in args.providers:
            for kind in bench.kinds_for(provider, kinds):
                value, events = per_event(provider, kind, args.sides[0])
                print(
                    f"{provider:<24} {kind:<5} {args.sides[0]:<12} {value:>10,.0f} "
                    f"instructions/event ({events} events)"
                )
        return 0
    rows = []
    for provider in args.providers:
        for kind in bench.kinds_for(provider, kinds):
            bare, events = per_event(provider, kind, "bare")
            core, _ = per_event(provider, kind, "stream-core")
            rows.append(Row(provider, kind, events, bare, core))

    if args.json:
        out: dict[str, Any] = {
            "mode": args.mode,
            "sizes": [small, large],
            "rows": [
                {
                    "provider": r.provider,
                    "stream": r.kind,
                    "delta_events": r.events,
                    "bare_instructions_per_event": r.bare,
                    "stream_core_instructions_per_event": r.core,
                    "ratio": r.ratio,
                }
                for r in rows
            ],
            "tool_over_text": [
                {"provider": t.provider, "ratio": u.core / t.core, "bare_ratio": u.bare / t.bare}
                for t, u in _pairs(rows)
            ],
            "raw": [
                {
                    "provider": j.provider,
                    "stream": j.kind,
                    "side": j.side,
                    "size": j.size,
                    "events": j.events,
                    "instructions": counts[j],
                }
                for j in jobs
            ],
        }
        print(json.dumps(out, indent=2))
    else:
        if args.mode == "socket":
            print("over a loopback socket (benchmarks/server.py), one HTTP chunk per event")
        print_tables(rows, small, large)
    return 0


if __name__ == "__main__":
    sys.exit(main())
