"""The gateway against LiteLLM's proxy and a direct call, in one run, on one upstream.

    python benchmarks/gateway.py [--litellm PATH] [--only latency cpu held]
                                 [--http h11 httptools] [--rounds R] [--held 1000]
                                 [--json FILE]
    python benchmarks/gateway.py --only servers [--asgi-python PATH]
    python benchmarks/gateway.py --only instructions [--instructions-litellm]

One loopback upstream, `gateway_vendor.py` (a fast Chat Completions fake vendor, standard
library, its own process, 127.0.0.1), and every side calling it at once:

- **direct**: the client calls the vendor itself (the baseline of every ratio);
- **stream-core chat / anthropic**: the same request through stream-core's gateway
  (`stream-core gateway`, uvicorn with its default h11 parser; `--http h11 httptools`
  runs one gateway process per parser, the second's sides named `stream-core/httptools`),
  a Chat Completions client (the upstream's own dialect: forwarded) or an Anthropic
  Messages one (translated); a side that does not deliver the vendor's text is left out,
  with the reason;
- **litellm chat / anthropic**: LiteLLM's proxy (`litellm --config ... --num_workers 1`,
  the binary at `--litellm`, default `/tmp/litellm-venv/bin/litellm`: install the latest
  release in a venv of its own, `uv venv /tmp/litellm-venv && VIRTUAL_ENV=/tmp/litellm-venv
  uv pip install 'litellm[proxy]'`; skipped with a message when absent), with a master key
  (it refuses to start without one) and `LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_
  MESSAGES` so its Anthropic side calls the same Chat Completions upstream. Both proxies
  check a client key on every request and run one process.

The client (`gateway_client.py`) is a minimal HTTP/1.1 client in this process, one
kept-alive connection per concurrent worker, the same code for every side. Every side is
first checked: a streamed and a non-streamed answer must carry exactly the vendor's text.

- **latency** (`--only latency`): per concurrency (1, 64, 512, closed loop) and side,
  non-streaming requests (time to the answer's last byte) and streamed ones (time to the
  first byte of the body) of `--chunks` (20) text chunks; p50, p99, the side's figure less
  the direct call's ("added") and over it (ratio). The sides alternate, in a rotated order
  per round (`--rounds`).
- **cpu**: `--cpu-streams` (4) streams of `--events` (1,000) chunks at once, paced (one
  event per socket write, `--gap-ms` (5) apart: each event is a read, as from a vendor)
  and in a burst (64 events per write): the proxy process tree's CPU time (user + system,
  /proc) over the upstream's SSE events. `--cpu-repeat` (3) runs, the least kept.
- **held** (memory per open stream; N concurrent streams): `--held` (1,000) streams at
  once, each held by the vendor after its first text chunk until every one has its first
  byte (or `--open-timeout`), then released: the proxy's RSS with them open less its RSS
  before (a process started afresh per side, after a 20-stream warm-up round), per stream
  open; and how many of the N delivered exactly the vendor's text.
- **servers** (`gateway_servers.py`): the ASGI server choice, on a trivial app and on the
  gateway.
- **instructions** (`gateway_servers.py`, valgrind): the gateway's instructions per
  streamed event and per request (`--instructions-litellm`: LiteLLM's too, ~1 hour).

Every process is started by this script and stopped by its id at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gateway_procs as procs  # noqa: E402
from gateway_client import Connection, Result, Target, finished, get, json_text, load, sse_text  # noqa: E402
from gateway_vendor import raise_open_files_limit, text  # noqa: E402

KEY = procs.KEY


@dataclass
class Side:
    name: str
    proxy: str  # "" (direct), "stream-core", "litellm"
    dialect: str  # "chat" | "anthropic"
    port: int
    pid: int | None
    routes: dict[str, str]

    def target(self, model: str) -> Target:
        if not self.proxy:
            path = self.routes[model].split(f":{self.port}", 1)[1] + "/chat/completions"
            return Target(self.name, self.port, path, {"authorization": "Bearer sk-b"})
        if self.dialect == "chat":
            headers = {"authorization": f"Bearer {KEY}"}
            return Target(self.name, self.port, "/v1/chat/completions", headers)
        headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
        return Target(self.name, self.port, "/v1/messages", headers)

    def body(self, model: str, stream: bool) -> bytes:
        message = {"role": "user", "content": "Say the benchmark words."}
        out: dict[str, object] = {
            "model": model if self.proxy else "gpt-4o",
            "max_tokens": 4096,
            "messages": [message],
        }
        if stream:
            out["stream"] = True
        return json.dumps(out).encode()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def good(r: Result, dialect: str, stream: bool) -> bool:
    return r.ok and r.status == 200 and finished(r.body, dialect, stream)


# -- set-up ----------------------------------------------------------------------------


@dataclass
class Proxy:
    """A proxy process as started, so it can be started afresh (`restart`)."""

    name: str
    cmd: list[str]
    env: dict[str, str]
    port: int
    ready: str
    pid: int = 0
    proc: Any = None

    def launch(self, run: procs.Procs, seconds: float) -> bool:
        proc = run.start(self.name, self.cmd, self.env)
        self.pid = proc.pid
        self.proc = proc
        return procs.wait_ready(self.port, self.ready, proc, seconds)

    def restart(self, run: procs.Procs, sides: list[Side]) -> None:
        run.stop(self.proc)
        if not self.launch(run, 180):
            raise RuntimeError(f"{self.name} did not start again:\n" + run.log(self.name))
        for side in sides:
            if side.proxy == self.name:
                side.pid = self.pid


def start(args: argparse.Namespace, run: procs.Procs) -> tuple[list[Side], list[Proxy], int, int]:
    vendor, vport = run.vendor()
    routes = procs.models(vport, args.chunks, args.events, args.gap_ms)
    sides = [Side("direct", "", "chat", vport, None, routes)]
    proxies = []
    # ours
    config = procs.ours_config(run.folder, routes)
    with config.open("a") as f:
        f.write(f'\n[keys.bench]\nsha256 = "{_sha(KEY)}"\n')
    cli = procs.gateway_cli() if args.ours == "cli" else None
    for http in args.http:
        port = procs.free_port()
        if cli is not None:
            cmd = cli + ["--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
            cmd += ["--http", http]
        else:
            server = "uvicorn-h11" if args.ours == "cli" else args.ours
            cmd = [sys.executable, str(procs.HERE / "gateway_serve.py"), "--server", server]
            cmd += ["--config", str(config), "--port", str(port)]
        name = "stream-core" if http == args.http[0] else f"stream-core/{http}"
        ours = Proxy(name, cmd, {"GW_BENCH_KEY": "sk-b"}, port, "/health")
        if ours.launch(run, 60):
            print(f"{name}: {' '.join(cmd)}", file=sys.stderr)
            proxies.append(ours)
            for d in args.dialects:
                sides.append(Side(f"{name} {d}", name, d, port, ours.pid, routes))
        else:
            print(f"{name} did not start:\n" + run.log(name), file=sys.stderr)
    # LiteLLM
    if not os.access(args.litellm, os.X_OK):
        print(f"LiteLLM skipped: no executable at {args.litellm}", file=sys.stderr)
        return sides, proxies, vport, vendor.pid
    lconf = procs.litellm_config(run.folder, routes)
    data = json.loads(lconf.read_text())
    data["general_settings"] = {"master_key": KEY}
    lconf.write_text(json.dumps(data, indent=2))
    lport = procs.free_port()
    env = {**procs.LITELLM_ENV, "LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES": "True"}
    cmd = [args.litellm, "--config", str(lconf), "--host", "127.0.0.1", "--port", str(lport)]
    lite = Proxy("litellm", cmd + ["--num_workers", "1"], env, lport, "/health/liveliness")
    if lite.launch(run, 180):
        print(f"litellm: {' '.join(lite.cmd)}", file=sys.stderr)
        proxies.append(lite)
        for d in args.dialects:
            sides.append(Side(f"litellm {d}", "litellm", d, lport, lite.pid, routes))
    else:
        print("LiteLLM did not start:\n" + run.log("litellm"), file=sys.stderr)
    return sides, proxies, vport, vendor.pid


def _sha(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()


async def check(sides: list[Side], chunks: int) -> list[Side]:
    """The sides whose streamed and non-streamed answers carry exactly the vendor's text."""
    kept = []
    for side in sides:
        why = ""
        for stream in (True, False):
            conn = Connection("127.0.0.1", side.port)
            r = await conn.send(side.target("bench").request(side.body("bench", stream)), True)
            await conn.close()
            try:
                got = (sse_text if stream else json_text)(r.body, side.dialect)
            except (ValueError, KeyError, IndexError, TypeError):
                got = None
            if r.status != 200 or got != text(chunks) or not finished(r.body, side.dialect, stream):
                why = f"{'stream' if stream else 'non-stream'}: {r.status} {r.body[:300]!r}"
        if why:
            print(f"{side.name}: left out, answer not the vendor's: {why}", file=sys.stderr)
        else:
            kept.append(side)
    return kept


# -- the measures ------------------------------------------------------------------------

CONCURRENCY = {1: (300, 10), 64: (1280, 2), 512: (2048, 1)}
"""concurrency -> (requests timed, warm-up requests per worker)"""


async def latency(sides: list[Side], args: argparse.Namespace) -> list[dict[str, object]]:
    samples: dict[tuple[int, str, str], list[Result]] = {}
    walls: dict[tuple[int, str, str], float] = {}
    for rnd in range(args.rounds):
        for conc in args.concurrency:
            total, warm = CONCURRENCY.get(conc, (max(2 * conc, 300), 1))
            total = max(1, total * args.scale // 100)
            for mode in ("non-stream", "stream"):
                k = (rnd + conc) % len(sides)
                for side in sides[k:] + sides[:k]:
                    stream = mode == "stream"
                    t = side.target("bench")
                    began = time.perf_counter()
                    rs = await load(t, side.body("bench", stream), conc, total, warm)
                    key = (conc, mode, side.name)
                    walls[key] = walls.get(key, 0.0) + time.perf_counter() - began
                    for r in rs:
                        if r.ok and not good(r, side.dialect, stream):
                            r.ok = False
                            r.error = str(r.status) if r.status != 200 else "unfinished"
                    samples.setdefault(key, []).extend(rs)
                    print(f"  latency c={conc} {mode} {side.name}: {len(rs)}", file=sys.stderr)
    rows = []
    for (conc, mode, name), rs in samples.items():
        values = [(r.ttfb if mode == "stream" else r.total) * 1000 for r in rs if r.ok]
        errors: dict[str, int] = {}
        for r in rs:
            if not r.ok:
                errors[r.error] = errors.get(r.error, 0) + 1
        rows.append(
            {
                "concurrency": conc,
                "mode": mode,
                "side": name,
                "requests": len(rs),
                "failures": sum(not r.ok for r in rs),
                "errors": errors,
                "p50_ms": pct(values, 0.5),
                "p99_ms": pct(values, 0.99),
                "req_per_s": len(rs) / walls[(conc, mode, name)],
            }
        )
    for row in rows:
        base = next(
            r
            for r in rows
            if r["side"] == "direct"
            and r["concurrency"] == row["concurrency"]
            and r["mode"] == row["mode"]
        )
        for q in ("p50", "p99"):
            ours, theirs = float(row[f"{q}_ms"]), float(base[f"{q}_ms"])  # type: ignore[arg-type]
            row[f"added_{q}_ms"] = ours - theirs
            row[f"ratio_{q}"] = ours / theirs
    return rows


async def cpu(
    sides: list[Side], args: argparse.Namespace, vendor_pid: int
) -> list[dict[str, object]]:
    best: dict[tuple[str, str], dict[str, object]] = {}
    fails: dict[tuple[str, str], int] = {}
    for rep in range(args.cpu_repeat):
        for model, mode in (("bench-paced", "paced"), ("bench-burst", "burst")):
            k = rep % len(sides)
            for side in sides[k:] + sides[:k]:
                t = side.target(model)
                # connections opened and warmed with the short stream, then the long ones
                await load(side.target("bench"), side.body("bench", True), 2, 2, 0)
                c0 = procs.cpu_seconds(side.pid) if side.pid else 0.0
                v0 = procs.cpu_seconds(vendor_pid)
                began = time.perf_counter()
                n = args.cpu_streams
                rs = await load(t, side.body(model, True), n, n, 0, timeout=600)
                wall = time.perf_counter() - began
                c1 = procs.cpu_seconds(side.pid) if side.pid else 0.0
                v1 = procs.cpu_seconds(vendor_pid)
                events = n * (args.events + 4)  # role, text chunks, finish, usage, [DONE]
                bad = sum(not good(r, side.dialect, True) for r in rs)
                key = (mode, side.name)
                fails[key] = fails.get(key, 0) + bad
                row = {
                    "mode": mode,
                    "side": side.name,
                    "streams": n,
                    "events": events,
                    "proxy_cpu_s": c1 - c0,
                    "us_per_event": (c1 - c0) / events * 1e6,
                    "vendor_us_per_event": (v1 - v0) / events * 1e6,
                    "wall_s": wall,
                }
                old = best.get(key)
                if old is None or float(row["us_per_event"]) < float(old["us_per_event"]):  # type: ignore[arg-type]
                    best[key] = row
                print(
                    f"  cpu {mode} {side.name}: {row['us_per_event']:.1f} us/event", file=sys.stderr
                )
    rows = list(best.values())
    for row in rows:
        row["failures"] = fails[(str(row["mode"]), str(row["side"]))]
        lite = [
            r
            for r in rows
            if r["mode"] == row["mode"]
            and str(r["side"]).startswith("litellm")
            and str(r["side"]).split()[-1] == str(row["side"]).split()[-1]
        ]
        if lite and row["side"] != "direct":
            row["vs_litellm"] = float(row["us_per_event"]) / float(lite[0]["us_per_event"])  # type: ignore[arg-type]
    return rows


async def held_round(side: Side, n: int, vport: int, args: argparse.Namespace) -> dict[str, object]:
    target = side.target("bench-held")
    raw = target.request(side.body("bench-held", True))
    firsts = 0
    all_open = asyncio.Event()

    def first() -> None:
        nonlocal firsts
        firsts += 1
        if firsts == n:
            all_open.set()

    async def call() -> Result:
        conn = Connection("127.0.0.1", side.port)
        try:
            return await asyncio.wait_for(conn.send(raw, True, first), args.open_timeout + 120)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as e:
            return Result(False, error=type(e).__name__)
        finally:
            await conn.close()

    began = time.perf_counter()
    tasks = [asyncio.create_task(call()) for _ in range(n)]
    try:
        await asyncio.wait_for(all_open.wait(), args.open_timeout)
    except TimeoutError:
        pass
    opened, open_s = firsts, time.perf_counter() - began
    rss = procs.rss_bytes(side.pid) if side.pid else 0
    held_at_vendor = int((await get(vport, "/held")).body or 0)
    pending = set(tasks)
    while pending:
        await get(vport, "/go")
        _, pending = await asyncio.wait(pending, timeout=0.5)
    rs = [t.result() for t in tasks]
    ok = sum(
        r.ok and r.status == 200 and sse_text(r.body, side.dialect) == text(args.chunks) for r in rs
    )
    errors: dict[str, int] = {}
    for r in rs:
        if not (r.ok and r.status == 200):
            e = r.error or str(r.status)
            errors[e] = errors.get(e, 0) + 1
    return {
        "opened": opened,
        "open_s": open_s,
        "held_at_vendor": held_at_vendor,
        "rss": rss,
        "ok": ok,
        "errors": errors,
    }


async def held(
    sides: list[Side], proxies: list[Proxy], args: argparse.Namespace, vport: int, run: procs.Procs
) -> list[dict[str, object]]:
    """Per side, a proxy process of its own (started afresh): the RSS a 20-stream warm-up
    round leaves, then N streams held open at once."""
    rows = []
    for n in args.held:
        for side in sides:
            for proxy in proxies:
                if proxy.name == side.proxy:
                    proxy.restart(run, sides)
            await held_round(side, 20, vport, args)  # warm-up: the same paths, a few streams
            await asyncio.sleep(0.5)
            base = procs.rss_bytes(side.pid) if side.pid else 0
            r = await held_round(side, n, vport, args)
            row = {"side": side.name, "streams": n, **r, "rss_base": base}
            opened = max(1, int(r["opened"]))  # type: ignore[call-overload]
            row["kib_per_stream"] = (int(r["rss"]) - base) / opened / 1024 if side.pid else None  # type: ignore[call-overload]
            row["failures"] = n - int(r["ok"])  # type: ignore[call-overload]
            rows.append(row)
            print(f"  held {n} {side.name}: ok {r['ok']}, opened {r['opened']}", file=sys.stderr)
    return rows


# -- report ------------------------------------------------------------------------------


def report(result: dict[str, object]) -> str:
    from gateway_report import tables

    return tables(result)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--litellm", default="/tmp/litellm-venv/bin/litellm")
    p.add_argument("--asgi-python", default="/tmp/gw-asgi-venv/bin/python")
    p.add_argument(
        "--only",
        nargs="+",
        default=["latency", "cpu", "held"],
        choices=["latency", "cpu", "held", "servers", "instructions"],
    )
    p.add_argument("--ours", default="cli", help="cli, or a gateway_serve.py --server name")
    p.add_argument(
        "--http",
        nargs="+",
        default=["h11"],
        choices=["h11", "httptools"],
        help="the CLI's HTTP parser; several: one gateway process (and side) each",
    )
    p.add_argument("--dialects", nargs="+", default=["chat", "anthropic"])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 512])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--scale", type=int, default=100, help="percent of the default requests")
    p.add_argument("--chunks", type=int, default=20)
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--gap-ms", type=float, default=5.0)
    p.add_argument("--cpu-streams", type=int, default=4)
    p.add_argument("--cpu-repeat", type=int, default=3)
    p.add_argument("--held", type=int, nargs="+", default=[1000])
    p.add_argument("--open-timeout", type=float, default=60.0)
    p.add_argument("--servers", nargs="+", default=None)
    p.add_argument("--instructions-litellm", action="store_true", help="LiteLLM too (slow)")
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


async def measure(args: argparse.Namespace, run: procs.Procs) -> dict[str, object]:
    result: dict[str, object] = {"machine": procs.machine(), "argv": sys.argv[1:]}
    result["versions"] = {
        "litellm": procs.version(str(Path(args.litellm).parent / "python"), "litellm"),
        "uvicorn": procs.version(sys.executable, "uvicorn"),
    }
    wanted = set(args.only)
    if wanted & {"latency", "cpu", "held"}:
        sides, proxies, vport, vpid = start(args, run)
        sides = await check(sides, args.chunks)
        result["sides"] = [s.name for s in sides]
        if "latency" in wanted:
            result["latency"] = await latency(sides, args)
        if "cpu" in wanted:
            result["cpu"] = await cpu(sides, args, vpid)
        if "held" in wanted:
            result["held"] = await held(sides, proxies, args, vport, run)
        run.stop_all()
    if wanted & {"servers", "instructions"}:
        import gateway_servers

        if "servers" in wanted:
            result["servers"] = await gateway_servers.compare(args, run)
        if "instructions" in wanted:
            result["instructions"] = await gateway_servers.instructions(args, run)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    raise_open_files_limit()
    with tempfile.TemporaryDirectory(prefix="gw-bench-") as folder:
        run = procs.Procs(Path(folder))
        try:
            result = asyncio.run(measure(args, run))
        finally:
            run.stop_all()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
