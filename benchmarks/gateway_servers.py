"""`gateway.py --only servers` and `--only instructions`.

**servers**: which ASGI server the gateway should run on. Each server, in the venv of
`--asgi-python` (default `/tmp/gw-asgi-venv/bin/python`; build it apart from the project:
`uv venv /tmp/gw-asgi-venv && VIRTUAL_ENV=/tmp/gw-asgi-venv uv pip install -e . uvicorn
httptools uvloop hypercorn granian`), serves two apps from `gateway_serve.py`: `trivial`
(the vendor's answers from memory: the server's own cost) and `gateway` (stream-core's
gateway in front of the benchmark's vendor, Chat Completions both sides). Per (app,
server): sequential p50 of non-streaming requests and of the streamed answer's first
byte, the first byte's p50 and p99 at 64 concurrent, and the server process tree's CPU
time per SSE event over `--cpu-streams` paced streams of `--events` events. A server
missing from the venv is reported as such.

**instructions**: valgrind's cachegrind count of `stream-core gateway` (the CLI, its
default h11 parser) serving, after the same start-up and warm-up, nothing more (run A),
`R` streamed answers of `--chunks` chunks (B) and `R` of `--events` chunks (C), and `R`
non-streamed ones (D): per streamed event (C - B) / (R x (events - chunks)), per streamed
request (B - A) / R, per non-streamed request (D - A) / R.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gateway_procs as procs
from gateway_client import Connection, Result, Target, finished, load

SERVERS = [
    "uvicorn-h11",
    "uvicorn-httptools",
    "uvicorn-uvloop",
    "hypercorn",
    "hypercorn-uvloop",
    "granian",
    "granian-uvloop",
]


def _cmd(server: str, python: str, port: int) -> list[str]:
    if server.startswith("granian"):
        loop = "uvloop" if server.endswith("uvloop") else "asyncio"
        return [python, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1"]  + [
            "--port", str(port), "--workers", "1", "--no-ws", "--loop", loop,
            "--backlog", "4096", "--log-level", "warning", "gateway_serve:app",
        ]  # fmt: skip
    return [python, str(procs.HERE / "gateway_serve.py"), "--server", server, "--port", str(port)]


def _has(python: str, server: str) -> bool:
    module = {"uvicorn-h11": "uvicorn", "uvicorn-httptools": "httptools"}.get(server)
    module = module or ("uvloop" if server.endswith("uvloop") else server.split("-")[0])
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    return done.returncode == 0


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else float("nan")


async def _one_server(
    app: str, server: str, port: int, pid: int, args: argparse.Namespace, headers: dict[str, str]
) -> dict[str, object]:
    import json

    def body(model: str, stream: bool) -> bytes:
        b: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        if stream:
            b["stream"] = True
        return json.dumps(b).encode()

    if app == "trivial":
        short = Target(app, port, f"/n/{args.chunks}/v1/chat/completions", headers)
        paced = Target(app, port, f"/p/{args.events}/{args.gap_ms:g}/v1/chat/completions", headers)
        model_short = model_paced = "bench"
    else:
        short = paced = Target(app, port, "/v1/chat/completions", headers)
        model_short, model_paced = "bench", "bench-paced"
    row: dict[str, object] = {"app": app, "server": server}
    fails = 0
    seq = max(30, 300 * args.scale // 100)
    rs = await load(short, body(model_short, False), 1, seq, 10)
    fails += sum(not (r.ok and r.status == 200) for r in rs)
    row["seq_p50_ms"] = _pct([r.total * 1000 for r in rs if r.ok], 0.5)
    rs = await load(short, body(model_short, True), 1, seq, 10)
    fails += sum(not (r.ok and r.status == 200 and finished(r.body, "chat", True)) for r in rs)
    row["ttfb_p50_ms"] = _pct([r.ttfb * 1000 for r in rs if r.ok], 0.5)
    began = time.perf_counter()
    rs = await load(short, body(model_short, True), 64, max(128, 640 * args.scale // 100), 2)
    row["c64_req_per_s"] = len(rs) / (time.perf_counter() - began)
    fails += sum(not (r.ok and r.status == 200 and finished(r.body, "chat", True)) for r in rs)
    row["c64_ttfb_p50_ms"] = _pct([r.ttfb * 1000 for r in rs if r.ok], 0.5)
    row["c64_ttfb_p99_ms"] = _pct([r.ttfb * 1000 for r in rs if r.ok], 0.99)
    best = float("inf")
    for _ in range(args.cpu_repeat):
        n = args.cpu_streams
        c0 = procs.cpu_seconds(pid)
        rs = await load(paced, body(model_paced, True), n, n, 0, timeout=600)
        c1 = procs.cpu_seconds(pid)
        fails += sum(not (r.ok and r.status == 200 and finished(r.body, "chat", True)) for r in rs)
        best = min(best, (c1 - c0) / (n * (args.events + 4)) * 1e6)
    row["us_per_event"] = best
    row["failures"] = fails
    return row


async def compare(args: argparse.Namespace, run: procs.Procs) -> list[dict[str, object]]:
    python = args.asgi_python
    if not os.access(python, os.X_OK):
        print(f"servers skipped: no interpreter at {python}", file=sys.stderr)
        return []
    vendor, vport = run.vendor()
    routes = procs.models(vport, args.chunks, args.events, args.gap_ms)
    config = procs.ours_config(run.folder, routes)
    rows: list[dict[str, object]] = []
    for app in ("trivial", "gateway"):
        for server in args.servers or SERVERS:
            if not _has(python, server):
                rows.append({"app": app, "server": server, "note": "not installed"})
                continue
            port = procs.free_port()
            env = {"GW_BENCH_APP": app, "GW_BENCH_CONFIG": str(config), "GW_BENCH_KEY": "sk-b"}
            cmd = _cmd(server, python, port)
            if app == "gateway" and not server.startswith("granian"):
                cmd += ["--app", "gateway", "--config", str(config)]
            elif not server.startswith("granian"):
                cmd += ["--app", "trivial"]
            proc = run.start(f"{app}-{server}", cmd, env, cwd=procs.HERE)
            ready = "/health" if app == "gateway" else "/n/1/v1/chat/completions"
            if not procs.wait_ready(port, ready, proc, 60):
                rows.append({"app": app, "server": server, "note": "did not start"})
                print(run.log(f"{app}-{server}"), file=sys.stderr)
                run.stop(proc)
                continue
            try:
                row = await _one_server(app, server, port, proc.pid, args, {})
            finally:
                run.stop(proc)
            rows.append(row)
            print(f"  servers {app} {server}: {row}", file=sys.stderr)
    run.stop(vendor)
    return rows


# -- instructions ------------------------------------------------------------------------


def _counted(
    run: procs.Procs, config: Path, out: Path, work: list[tuple[str, bool, int]], http: str
) -> int:
    """Instructions of one gateway process under cachegrind doing `work` after warm-up:
    (model, stream, requests) items, sequential."""
    port = procs.free_port()
    code = "import sys; from stream_core._cli import main; sys.exit(main())"
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}"]
    cmd += [str(procs.ROOT / ".venv/bin/python"), "-c", code, "gateway", "--config", str(config)]
    cmd += ["--port", str(port), "--http", http]
    proc = run.start(out.stem, cmd, {"GW_BENCH_KEY": "sk-b"})
    if not procs.wait_ready(port, "/health", proc, 900):
        raise RuntimeError("gateway under valgrind did not start:\n" + run.log(out.stem))

    async def drive() -> None:
        import json

        headers = {"authorization": "Bearer x"}
        t = Target("gw", port, "/v1/chat/completions", headers)
        for model, stream, n in [("bench", True, 3), ("bench", False, 3)] + work:
            body: dict[str, object] = {"model": model}
            body["messages"] = [{"role": "user", "content": "hi"}]
            if stream:
                body["stream"] = True
            raw = t.request(json.dumps(body).encode())
            conn = Connection("127.0.0.1", port)
            for _ in range(n):
                r: Result = await conn.send(raw, False)
                if r.status != 200:
                    raise RuntimeError(f"gateway answered {r.status}: {r.body[:200]!r}")
            await conn.close()

    asyncio.run(drive())
    run.stop(proc)  # SIGTERM: uvicorn returns, valgrind writes its counts
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {out}")


def instructions(args: argparse.Namespace, run: procs.Procs) -> list[dict[str, object]]:
    if shutil.which("valgrind") is None:
        print("instructions skipped: valgrind is not installed", file=sys.stderr)
        return []
    vendor, vport = run.vendor()
    routes = procs.models(vport, args.chunks, args.events, args.gap_ms)
    config = procs.ours_config(run.folder, routes)
    reps = 20
    folder = Path(tempfile.mkdtemp(prefix="gw-cg-", dir=run.folder))
    counts = {}
    plans = {
        "A": [],
        "B": [("bench", True, reps)],
        "C": [("bench-burst", True, reps)],
        "D": [("bench", False, reps)],
    }
    for name, work in plans.items():
        counts[name] = _counted(run, config, folder / f"cg-{name}.out", work, args.http)
        print(f"  instructions run {name}: {counts[name]:,}", file=sys.stderr)
    run.stop(vendor)
    per_event = (counts["C"] - counts["B"]) / (reps * (args.events - args.chunks))
    return [
        {
            "side": f"stream-core chat ({args.http})",
            "mode": f"stream, {args.chunks} chunks",
            "per_event": per_event,
            "per_request": (counts["B"] - counts["A"]) / reps,
        },
        {
            "side": f"stream-core chat ({args.http})",
            "mode": "non-stream",
            "per_event": float("nan"),
            "per_request": (counts["D"] - counts["A"]) / reps,
        },
    ]
