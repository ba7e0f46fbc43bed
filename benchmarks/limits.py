"""Quotas for a fleet: K worker processes x M concurrent calls against one rate-limited
vendor, with no limiter, the file store, Redis, and LiteLLM's Router (Redis-backed rpm/tpm)
in the same run.

    python benchmarks/limits.py [--workers 4] [--concurrency 16] [--window 60]
        [--windows 3] [--requests 200] [--tokens 8000] [--sides none file redis litellm]
        [--litellm-python PATH] [--budget] [--kill] [--overhead] [--json]

The vendor (tests/limited_vendor.py, a process of its own on 127.0.0.1) enforces a request
limit and a token limit per fixed window, counts each request's prompt plus `max_tokens`
when it arrives (as OpenAI does) and settles it to what it used at its end, answers over a
limit with a 429 and `retry-after-ms`, and sends OpenAI's `x-ratelimit-*` headers (resets
as Go durations) on every response. A fresh vendor per side. The workers
(tests/fleet_worker.py, `--workers` processes started together) call it for `--windows`
windows; a real `redis-server` (Debian's package) is started on loopback for the run.

Per side and window: requests and tokens the vendor admitted against the limit, the 429s
it sent, and the binding share (the larger of requests/limit and tokens/limit) - the
first window apart (a limiter starts open and learns there). Goals (issue 26): after the
first window at most 1% over a limit, at least 95% of the binding limit used, zero 429s.

LiteLLM's Router counts rpm/tpm per minute, so its side is given the per-minute figures
of the vendor's limits (`--window 60` makes them the same); it needs LiteLLM in an
environment of its own (`--litellm-python`, e.g. `uv venv /tmp/llvenv && uv pip install
--python /tmp/llvenv/bin/python litellm redis`); without one that side is skipped.

`--budget`: 4 processes share a 5 USD budget through Redis; reports how close to it they
ended (goal: within one call's worst case, never over). `--kill`: Redis is killed and
restarted mid-run; reports failed calls (goal: none). `--overhead`: the in-process store's
admission and settlement per call, timed over 20,000 calls (goal: at most 20 us); the
instruction count of a whole call with and without the limiter is
`benchmarks/cachegrind.py --mode percall --limits`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))

from redis_server import RedisServer  # noqa: E402


def start_vendor(args: argparse.Namespace, **override: Any) -> tuple[subprocess.Popen[str], str]:
    opts = {"requests": args.requests, "tokens": args.tokens, "window": args.window, **override}
    cmd = [sys.executable, str(TESTS / "limited_vendor.py"), "--port", "0"]
    for k, v in opts.items():
        if v is not None:
            cmd += [f"--{k.replace('_', '-')}", str(v)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def stats(url: str) -> dict[str, Any]:
    base = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/stats", timeout=10) as r:
        found: dict[str, Any] = json.loads(r.read())
    return found


def run_workers(
    args: argparse.Namespace,
    url: str,
    store: str,
    *extra: str,
    python: str | None = None,
    seconds: float | None = None,
) -> list[dict[str, Any]]:
    start_at = time.time() + 2.0
    duration = seconds if seconds is not None else args.window * args.windows
    procs = [
        subprocess.Popen(
            [
                python or sys.executable,
                str(TESTS / "fleet_worker.py"),
                "--url",
                url,
                "--store",
                store,
                "--seconds",
                repr(duration),
                "--calls",
                "100000000",
                "--concurrency",
                str(args.concurrency),
                "--start-at",
                repr(start_at),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )  # fmt: skip
        for _ in range(args.workers)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=duration + 300)
        if p.returncode != 0:
            raise SystemExit(f"worker failed: {stderr[-2000:]}")
        result = json.loads(stdout)
        result["log"] = stderr
        out.append(result)
    return out


def summarize(side: str, vendor: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    windows = [w for _, w in sorted(vendor["windows"].items(), key=lambda kv: int(kv[0]))]
    req_limit, tok_limit = vendor["requests"], vendor["tokens"]
    kinds: dict[str, int] = {}
    for r in results:
        for k, n in r["kinds"].items():
            kinds[k] = kinds.get(k, 0) + n
    # Whole windows only: the run starts and ends part way through one.
    whole = windows[1:-1] if len(windows) > 2 else windows
    later = whole[1:] if len(whole) > 1 else whole

    def share(w: dict[str, int]) -> float:
        return max(w["requests"] / req_limit, w["tokens"] / tok_limit)

    return {
        "side": side,
        "windows": [{**w, "share": round(share(w), 4)} for w in windows],
        "first_429": whole[0]["429"] if whole else 0,
        "later_429": sum(w["429"] for w in later),
        "max_over_requests": max((w["requests"] / req_limit - 1 for w in later), default=0.0),
        "max_over_tokens": max((w["tokens"] / tok_limit - 1 for w in later), default=0.0),
        "mean_share": sum(share(w) for w in later) / len(later) if later else 0.0,
        "calls": kinds,
    }


def print_side(s: dict[str, Any]) -> None:
    print(f"\n### {s['side']}")
    print("| window | requests | tokens | 429s | share of the binding limit |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for i, w in enumerate(s["windows"]):
        print(f"| {i} | {w['requests']:,} | {w['tokens']:,} | {w['429']:,} | {w['share']:.1%} |")
    print(
        f"calls: {s['calls']}; after the first whole window: 429s {s['later_429']}, "
        f"most over the request limit {s['max_over_requests']:+.1%}, over the token limit "
        f"{s['max_over_tokens']:+.1%}, mean share {s['mean_share']:.1%}"
    )


def overhead(calls: int = 20_000) -> float:
    """Microseconds per call of the in-process store's admission and settlement, for a
    key with learned request and token limits (the limiter's whole work per call)."""
    import asyncio

    from stream_core._limits import limiter

    limiter.configure_limits()
    key = limiter.limit_key("openai", "https://api.openai.com:/v1/chat/completions", "k", "m")
    needs = {"requests": 1, "tokens": 60, "input_tokens": 10, "output_tokens": 50}
    far = time.time() + 3600
    report = [["requests", 10**9, 10**9, far], ["tokens", 10**12, 10**12, far]]

    async def run() -> float:
        _, ticket, _ = await limiter.admit(key, needs, [], False)
        assert ticket is not None
        ticket.report, ticket.used = report, needs
        await limiter.settle(ticket)
        used = {"requests": 1, "tokens": 30, "input_tokens": 10, "output_tokens": 20}
        t0 = time.perf_counter()
        for _ in range(calls):
            _, ticket, _ = await limiter.admit(key, needs, [], False)
            assert ticket is not None
            ticket.report, ticket.used = report, used
            await limiter.settle(ticket)
        return (time.perf_counter() - t0) / calls * 1e6

    return asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--sides", nargs="*", default=["none", "file", "redis", "litellm"])
    parser.add_argument("--litellm-python", default="/tmp/llvenv/bin/python")
    parser.add_argument("--budget", action="store_true")
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    report: dict[str, Any] = {"config": vars(args)}
    redis = RedisServer().start()
    try:
        sides = []
        for side in args.sides:
            if side == "litellm" and not Path(args.litellm_python).exists():
                print(f"litellm: skipped ({args.litellm_python} not found)")
                continue
            proc, url = start_vendor(args, delay=args.delay)
            try:
                tmp = tempfile.mkdtemp()
                store = {
                    "none": "none",
                    "file": os.path.join(tmp, "limits.json"),
                    "redis": redis.url,
                    "litellm": redis.url,
                }[side]
                extra: list[str] = ["--prefix", f"bench-{side}-{time.time_ns()}"]
                python = None
                if side == "litellm":
                    per_minute = 60.0 / args.window
                    extra = [
                        "--side", "litellm",
                        "--rpm", str(int(args.requests * per_minute)),
                        "--tpm", str(int(args.tokens * per_minute)),
                    ]  # fmt: skip
                    python = args.litellm_python
                results = run_workers(args, url, store, *extra, python=python)
                s = summarize(side, stats(url), results)
            finally:
                proc.kill()
                proc.wait()
            sides.append(s)
            if not args.json:
                print_side(s)
        report["sides"] = sides

        if args.budget:
            proc, url = start_vendor(args, requests=100_000, tokens=10**9, window=60.0)
            try:
                results = run_workers(
                    args, url, redis.url, "--budget", "5.0", "--prefix", f"budget-{time.time_ns()}",
                    "--prices", "1000", "2000", "--max-tokens", "30", seconds=60.0,
                )  # fmt: skip
            finally:
                proc.kill()
                proc.wait()
            spent = sum(r["cost"] for r in results)
            worst = (20 * 1000 + 30 * 2000) / 1e6  # about one call's worst case
            report["budget"] = {"spent": spent, "budget": 5.0, "worst_call": worst}
            if not args.json:
                print(
                    f"\nbudget: 4 processes spent {spent:.4f} of 5.0 USD "
                    f"({5.0 - spent:.4f} left; one call's worst case ~{worst:.3f})"
                )

        if args.kill:
            import threading

            proc, url = start_vendor(args, window=2.0, requests=100, tokens=10**6)
            killer = threading.Timer(4.0, redis.stop)
            restarter = threading.Timer(6.0, redis.start)
            killer.start()
            restarter.start()
            try:
                results = run_workers(
                    args, url, redis.url, "--prefix", f"kill-{time.time_ns()}", seconds=10.0
                )
            finally:
                proc.kill()
                proc.wait()
            kinds: dict[str, int] = {}
            for r in results:
                for k, n in r["kinds"].items():
                    kinds[k] = kinds.get(k, 0) + n
            fell_back = sum("limiting in this process" in r["log"] for r in results)
            rejoined = sum("answers again" in r["log"] for r in results)
            report["kill"] = {"calls": kinds, "fell_back": fell_back, "rejoined": rejoined}
            if not args.json:
                print(
                    f"\nredis killed at 4 s, restarted at 6 s: calls {kinds}; "
                    f"{fell_back} workers fell back, {rejoined} rejoined"
                )
    finally:
        redis.stop()

    if args.overhead:
        us = overhead()
        report["overhead_us"] = us
        if not args.json:
            print(f"\nin-process store, admission + settlement: {us:.1f} us a call (goal <= 20)")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
