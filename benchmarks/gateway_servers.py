"""`gateway.py --only servers` and `--only instructions`.

**servers**: which ASGI server the gateway should run on. Each server, in the venv of
`--asgi-python` (default `/tmp/gw-asgi-venv/bin/python`; build it apart from the project:
`uv venv /tmp/gw-asgi-venv && VIRTUAL_ENV=/tmp/gw-asgi-venv uv pip install -e . uvicorn
httptools uvloop hypercorn granian`), serves two apps from `gateway_serve.py`: `trivial`
(the vendor's answers from memory: the server's own cost) and `gateway` (stream-core's
gateway in front of the benchmark's vendor, Chat Completions both sides). Per (app,
server): sequential p50 of non-streaming requests and of the streamed answer's first
byte, the first byte's p50 and p99 at 64 concurrent, and the server process tree's CPU
time per SSE event over `--cpu-streams` streams at once: for the gateway, paced streams
of `--events` events from the vendor; for the trivial app (no upstream to pace it),
bursts of 20 x `--events` events. A server
missing from the venv is reported as such.

**instructions**: valgrind's cachegrind count of `stream-core gateway` (the CLI, the
parser `--http` names, h11 by default), per dialect of `--dialects`. Every process starts
and warms up the same way (3 streamed and 3 whole answers per dialect), then serves
sequentially R = 20 requests of one kind: streamed answers of `--chunks` chunks
(`short`), of `--events` chunks (`long`, the vendor writing 64 events per socket write),
or whole answers (`whole`); one more process serves nothing more (`none`). Per streamed
event: (long - short) / (R x (events - chunks)); per request: (short - none) / R and
(whole - none) / R. Start-up, imports and warm-up cancel out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
    def body(model: str, stream: bool) -> bytes:
        b: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        if stream:
            b["stream"] = True
        return json.dumps(b).encode()

    if app == "trivial":
        short = Target(app, port, f"/n/{args.chunks}/v1/chat/completions", headers)
        # no upstream to pace it: a burst, long enough for /proc's 10 ms ticks
        events = 20 * args.events
        paced = Target(app, port, f"/n/{events}/v1/chat/completions", headers)
        model_short = model_paced = "bench"
    else:
        short = paced = Target(app, port, "/v1/chat/completions", headers)
        model_short, model_paced = "bench", "bench-paced"
        events = args.events
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
        best = min(best, (c1 - c0) / (n * (events + 4)) * 1e6)
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

Launch = tuple[Callable[[int], list[str]], dict[str, str], str, str]
"""How to start a server on a port, its environment, its ready path, its client key."""


def _ours(config: Path, http: str) -> Launch:
    code = "import sys; from stream_core._cli import main; sys.exit(main())"
    python = str(procs.ROOT / ".venv/bin/python")

    def make(port: int) -> list[str]:
        return [python, "-c", code, "gateway", "--config", str(config), "--port", str(port)] + [
            "--http",
            http,
        ]

    return make, {"GW_BENCH_KEY": "sk-b"}, "/health", "x"


def _litellm(run: procs.Procs, routes: dict[str, str], binary: str) -> Launch:
    config = procs.litellm_config(run.folder, routes)
    data = json.loads(config.read_text())
    data["general_settings"] = {"master_key": procs.KEY}
    config.write_text(json.dumps(data, indent=2))
    python = str(Path(binary).parent / "python")
    env = {**procs.LITELLM_ENV, "LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES": "True"}

    def make(port: int) -> list[str]:
        return [python, binary, "--config", str(config), "--host", "127.0.0.1"] + [
            "--port",
            str(port),
            "--num_workers",
            "1",
        ]

    return make, env, "/health/liveliness", procs.KEY


async def _counted(
    run: procs.Procs,
    out: Path,
    server: list[str],
    env: dict[str, str],
    ready: tuple[int, str],
    key: str,
    work: list[tuple[str, str, bool, int]],
) -> int:
    """Instructions of one server process (`server`, listening at `ready`'s port) under
    cachegrind doing `work` after warm-up: (dialect, model, stream, requests) items,
    sequential, with client key `key`."""
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}"]
    proc = run.start(out.stem, cmd + server, env)
    port = ready[0]
    if not procs.wait_ready(port, ready[1], proc, 2400):
        raise RuntimeError("server under valgrind did not start:\n" + run.log(out.stem))
    warm = [(d, "bench", s, 3) for d in DIALECTS for s in (True, False)]
    for dialect, model, stream, n in warm + work:
        path, headers = DIALECTS[dialect]
        t = Target("gw", port, path, {k: v.format(key=key) for k, v in headers.items()})
        body: dict[str, object] = {"model": model, "max_tokens": 4096}
        body["messages"] = [{"role": "user", "content": "hi"}]
        if stream:
            body["stream"] = True
        raw = t.request(json.dumps(body).encode())
        conn = Connection("127.0.0.1", port)
        for _ in range(n):
            r: Result = await conn.send(raw, False)
            if r.status != 200:
                raise RuntimeError(f"server answered {r.status}: {r.body[:200]!r}")
        await conn.close()
    run.stop(proc, grace=600)  # SIGTERM: the server returns, valgrind writes its counts
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {out}")


DIALECTS = {
    "chat": ("/v1/chat/completions", {"authorization": "Bearer {key}"}),
    "anthropic": ("/v1/messages", {"x-api-key": "{key}", "anthropic-version": "2023-06-01"}),
}


async def instructions(args: argparse.Namespace, run: procs.Procs) -> list[dict[str, object]]:
    if shutil.which("valgrind") is None:
        print("instructions skipped: valgrind is not installed", file=sys.stderr)
        return []
    vendor, vport = run.vendor()
    routes = procs.models(vport, args.chunks, args.events, args.gap_ms)
    config = procs.ours_config(run.folder, routes)
    reps = 20
    folder = Path(tempfile.mkdtemp(prefix="gw-cg-", dir=run.folder))
    rows: list[dict[str, object]] = []
    servers = [(f"stream-core ({http})", _ours(config, http)) for http in args.http]
    if args.instructions_litellm:
        if os.access(args.litellm, os.X_OK):
            servers.append(("litellm", _litellm(run, routes, args.litellm)))
        else:
            print(f"LiteLLM skipped: no executable at {args.litellm}", file=sys.stderr)
    for label, (make, env, ready_path, key) in servers:
        plans: dict[str, list[tuple[str, str, bool, int]]] = {"none": []}
        for d in args.dialects:
            plans[f"{d} short"] = [(d, "bench", True, reps)]
            plans[f"{d} long"] = [(d, "bench-burst", True, reps)]
            plans[f"{d} whole"] = [(d, "bench", False, reps)]
        counts: dict[str, int] = {}
        for name, work in plans.items():
            out = folder / f"cg-{label.split()[0]}-{len(counts)}.out"
            port = procs.free_port()
            counts[name] = await _counted(run, out, make(port), env, (port, ready_path), key, work)
            print(f"  instructions {label} {name}: {counts[name]:,}", file=sys.stderr)
        for d in args.dialects:
            long, short = counts[f"{d} long"], counts[f"{d} short"]
            per_event = (long - short) / (reps * (args.events - args.chunks))
            rows.append(
                {
                    "side": f"{label} {d}",
                    "mode": f"stream of {args.chunks} chunks",
                    "per_event": per_event,
                    "per_request": (short - counts["none"]) / reps,
                }
            )
            rows.append(
                {
                    "side": f"{label} {d}",
                    "mode": "non-stream",
                    "per_event": float("nan"),
                    "per_request": (counts[f"{d} whole"] - counts["none"]) / reps,
                }
            )
    run.stop(vendor)
    return rows
