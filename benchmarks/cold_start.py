"""Cold start in a real install: import, first call and peak RSS, beside the bare loop.

    python benchmarks/cold_start.py [--venv DIR] [--rebuild] [--size 20000] [--rss-only] [--json]
    python benchmarks/cold_start.py --worker ...   (what the measured processes run)

What a user installs is measured, not the dev venv: `--venv` (default
/tmp/stream-core-cold-venv) is built with `uv venv` and `uv pip install --compile-bytecode
<this checkout>` (stream-core and its runtime dependencies, bytecode compiled, no dev
group: trio and OpenTelemetry there change what httpx, anyio and stream-core import).
`--rebuild` builds it afresh (do that after changing stream-core). Every measured process
runs that venv's interpreter; this driver may run in any Python.

Three figures, each stream-core's beside the bare loop's, measured in the same run:

- **import**: instructions (valgrind cachegrind) of `python -c "import stream_core"`
  against `python -c "import httpx"`, whole processes (interpreter start-up included, the
  way the ratio is quoted), and each less `python -c pass`. `import stream_core` loads its
  modules when a name is first used, so the import line of a program that makes calls
  (`from stream_core import Context, StreamOptions, UserMessage, get_model, stream`,
  which loads pydantic, httpx and the call's modules) is measured too.
- **first call**: a process importing its modules (that import line / `import httpx,
  httpx_sse`) and making 0, 1 or 2 calls, each under cachegrind; first call = I(1) - I(0),
  second = I(2) - I(1). The call is what a user writes at their first call: stream-core
  builds `get_model("anthropic", "claude-sonnet-4-5")` (pointed at the loopback server;
  a priced model, so the cost is computed), a `Context` and `StreamOptions` and iterates
  `stream(...)` to the end; the bare side builds an `httpx.AsyncClient()` (default TLS
  set-up included, as every new client does), POSTs, reads `aiter_sse()` and `json.loads`
  each event. Both read a recorded Anthropic stream from benchmarks/server.py (127.0.0.1,
  one HTTP chunk per event) over `http://`.
- **peak RSS**: `VmHWM` of a process that imports only what its side uses and replays a
  SIZE-delta text (and tool) body once in-process (an `httpx.MockTransport` serving 64 KiB
  chunks, as `run.py` does, read from a file) and once over the loopback socket
  (benchmarks/server.py, one HTTP chunk per event). Beside bare and stream-core, "bare +
  pydantic" is the bare loop in a process that also imports pydantic and validates one
  model: the floor for any library whose messages are pydantic models. `--rss-only`
  measures only this.

Needs `uv` (to build the venv) and `valgrind` (without it the instruction figures are
skipped and only RSS is reported).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURE = REPO / "contract_tests/fixtures/anthropic-messages/vercel-ai__anthropic-text.body"
DEFAULT_VENV = Path(tempfile.gettempdir()) / "stream-core-cold-venv"
IMPORT_TARGET = 2.0  # import stream_core / import httpx
FIRST_CALL_TARGET = 1.2  # stream-core's first call / bare's
RSS_TARGET = 1.2
CALL_IMPORT = "from stream_core import Context, StreamOptions, UserMessage, get_model, stream"
"""A program's import line: the names its calls use (each loads its module)."""
# `python -c` puts the working directory first on sys.path: run where no checkout is.
_NEUTRAL_DIR = tempfile.gettempdir()
_PAYLOAD = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


# --- the workers (run by the real install's interpreter) ----------------------------------


def _worker_call(side: str, url: str, calls: int) -> None:
    import asyncio

    if side == "bare":
        import json as json_

        import httpx
        from httpx_sse import EventSource

        async def main() -> None:
            if not calls:
                return
            client = httpx.AsyncClient(timeout=None)
            for _ in range(calls):
                async with client.stream("POST", url + "/bench", json=_PAYLOAD) as response:
                    async for sse in EventSource(response).aiter_sse():
                        json_.loads(sse.data)
            await client.aclose()

    else:
        # The import line of a program that makes calls (and of first_call.py).
        from stream_core import Context, StreamOptions, UserMessage, get_model, stream

        async def main() -> None:
            for _ in range(calls):
                model = get_model("anthropic", "claude-sonnet-4-5").model_copy(
                    update={"base_url": url}
                )
                context = Context(messages=[UserMessage(content="hi")])
                options = StreamOptions(api_key="sk-bench", max_retries=0)
                async with stream(model, context, options) as s:
                    async for _event in s:
                        pass
                    message = await s.result()
                assert message.error is None and message.usage.cost is not None, message.error

    asyncio.run(main())


def _worker_rss(side: str, provider: str, source: str) -> None:
    """One replay of `source` (a body file, or a benchmarks/server.py URL); prints peak RSS."""
    import asyncio

    import httpx

    if source.startswith("http"):
        url, transport = source + "/bench", None
    else:
        data = Path(source).read_bytes()
        chunks = [data[i : i + 64 * 1024] for i in range(0, len(data), 64 * 1024)]
        del data

        def handler(request: httpx.Request) -> httpx.Response:
            async def serve() -> Any:
                for chunk in chunks:
                    yield chunk

            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=headers, content=serve())

        url, transport = "http://bench/bench", httpx.MockTransport(handler)

    if side in ("bare", "bare-pydantic"):
        import json as json_

        from httpx_sse import EventSource

        if side == "bare-pydantic":
            # The floor for any library whose messages are pydantic models: pydantic
            # imported and one model validated (its first schema build), nothing else.
            from pydantic import BaseModel

            class Message(BaseModel):
                role: str
                content: str

            Message.model_validate(_PAYLOAD["messages"][0])

        async def main() -> int:
            n = 0
            async with httpx.AsyncClient(transport=transport, timeout=None) as client:
                async with client.stream("POST", url, json=_PAYLOAD) as response:
                    async for sse in EventSource(response).aiter_sse():
                        n += 1
                        if sse.data != "[DONE]":
                            json_.loads(sse.data)
            return n

    else:
        import stream_core

        async def main() -> int:
            n = 0
            base_url = url.removesuffix("/bench")
            model = stream_core.Model(id="bench", api=provider, provider="bench", base_url=base_url)
            context = stream_core.Context(messages=[stream_core.UserMessage(content="hi")])
            # In-process: a client on the mock transport; over a socket: the shared client.
            client = None if transport is None else httpx.AsyncClient(transport=transport)
            options = stream_core.StreamOptions(client=client, api_key="bench", max_retries=0)
            async with stream_core.stream(model, context, options) as s:
                async for _event in s:
                    n += 1
                message = await s.result()
            assert message.error is None, message.error
            return n

    events = asyncio.run(main())
    rss_kb = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):  # not getrusage: Linux keeps ru_maxrss across exec
            rss_kb = int(line.split()[1])
    print(json.dumps({"events": events, "rss_kb": rss_kb}))


# --- the driver ---------------------------------------------------------------------------


def build_venv(venv: Path, rebuild: bool) -> Path:
    """The real install's interpreter: stream-core from this checkout, bytecode compiled."""
    python = venv / "bin" / "python"
    if python.exists() and not rebuild:
        return python
    uv = shutil.which("uv")
    if uv is None:
        sys.exit("cold_start.py needs uv to build the real-install venv")
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--reinstall-package",
            "stream-core",
            "--python",
            str(python),
            "--compile-bytecode",
            str(REPO),
        ],
        check=True,
    )
    return python


def instructions(argv: list[str]) -> int:
    """Instructions valgrind counts for one run of `argv` (the whole process)."""
    with tempfile.NamedTemporaryFile(suffix=".out") as out:
        proc = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no",
             f"--cachegrind-out-file={out.name}", *argv],
            capture_output=True, text=True, check=False, cwd=_NEUTRAL_DIR,
        )  # fmt: skip
        if proc.returncode:
            raise RuntimeError(f"{argv} failed:\n{proc.stderr[-2000:]}")
        for line in Path(out.name).read_text().splitlines():
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no summary line in cachegrind's output")


def rss(python: Path, side: str, provider: str, source: str) -> int:
    argv = [str(python), __file__, "--worker", "rss", side, provider, source]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=_NEUTRAL_DIR)
    return int(json.loads(out.stdout.strip().splitlines()[-1])["rss_kb"])


def measure(python: Path, size: int, use_valgrind: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import run  # the body generator and the loopback server

    result: dict[str, Any] = {"python": str(python), "size": size}
    if use_valgrind:
        py = str(python)
        base = instructions([py, "-c", "pass"])
        httpx_i = instructions([py, "-c", "import httpx"])
        core_i = instructions([py, "-c", "import stream_core"])
        names_i = instructions([py, "-c", CALL_IMPORT])
        result["import"] = {
            "python -c pass": base,
            "import httpx": httpx_i,
            "import stream_core": core_i,
            CALL_IMPORT: names_i,
            "names_ratio": names_i / httpx_i,
            "ratio": core_i / httpx_i,
            "ratio_less_startup": (core_i - base) / (httpx_i - base),
        }
        with run.Loopback({"bench": FIXTURE.read_bytes()}) as server:
            url = server.base_url("bench")
            calls: dict[str, list[int]] = {}
            for side in ("bare", "stream-core"):
                calls[side] = [
                    instructions([py, __file__, "--worker", "call", side, url, str(n)])
                    for n in (0, 1, 2)
                ]
        first = {s: c[1] - c[0] for s, c in calls.items()}
        second = {s: c[2] - c[1] for s, c in calls.items()}
        result["first_call"] = {
            "bare": {"setup": calls["bare"][0], "first": first["bare"], "second": second["bare"]},
            "stream-core": {
                "setup": calls["stream-core"][0],
                "first": first["stream-core"],
                "second": second["stream-core"],
            },
            "ratio": first["stream-core"] / first["bare"],
            "setup_plus_first_ratio": calls["stream-core"][1] / calls["bare"][1],
        }
    result["rss"] = []
    with tempfile.TemporaryDirectory() as tmp, run.Loopback() as server:
        for provider in ("anthropic-messages", "openai-completions"):
            for kind in ("text", "tool"):
                body = run.make_body(provider, kind, size)
                path = Path(tmp) / f"{provider}-{kind}.sse"
                path.write_bytes(body.data)
                server.add(f"{provider}-{kind}", body.data)
                # In-process (the body in memory, 64 KiB chunks), then over the socket (one
                # HTTP chunk per event, nothing held but what each side keeps).
                for mode, source in (
                    ("in-process", str(path)),
                    ("socket", server.base_url(f"{provider}-{kind}")),
                ):
                    bare_kb = rss(python, "bare", provider, source)
                    floor_kb = rss(python, "bare-pydantic", provider, source)
                    core_kb = rss(python, "stream-core", provider, source)
                    result["rss"].append(
                        {
                            "provider": provider,
                            "kind": kind,
                            "mode": mode,
                            "events": body.events,
                            "bare_kb": bare_kb,
                            "bare_pydantic_kb": floor_kb,
                            "stream_core_kb": core_kb,
                            "ratio": core_kb / bare_kb,
                            "floor_ratio": floor_kb / bare_kb,
                            "over_floor": core_kb / floor_kb,
                        }
                    )
    return result


def _mark(ratio: float, target: float) -> str:
    return "ok" if ratio <= target else "MISS"


def print_tables(r: dict[str, Any]) -> None:
    m = 1e6
    if "import" in r:
        i = r["import"]
        base = i["python -c pass"]
        print(f"Import (instructions, real install: {r['python']})\n")
        print("| process | instructions | less `python -c pass` |")
        print("| --- | ---: | ---: |")
        for name in ("python -c pass", "import httpx", "import stream_core", CALL_IMPORT):
            print(f"| `{name}` | {i[name] / m:.0f} M | {(i[name] - base) / m:.0f} M |")
        print(
            f"| **import stream_core / import httpx** | **{i['ratio']:.2f}x** "
            f"| {i['ratio_less_startup']:.2f}x |"
        )
        print(f"| the import line / import httpx | {i['names_ratio']:.2f}x | |")
        print(f"\ntarget <= {IMPORT_TARGET}x: {_mark(i['ratio'], IMPORT_TARGET)}\n")
        f = r["first_call"]
        print("First call over http:// (instructions)\n")
        print("| side | imports + asyncio.run | first call | second call |")
        print("| --- | ---: | ---: | ---: |")
        for side in ("bare", "stream-core"):
            s = f[side]
            print(
                f"| {side} | {s['setup'] / m:.0f} M | {s['first'] / m:.1f} M "
                f"| {s['second'] / m:.1f} M |"
            )
        print(
            f"| **stream-core / bare** | {f['stream-core']['setup'] / f['bare']['setup']:.2f}x "
            f"| **{f['ratio']:.2f}x** | "
            f"{f['stream-core']['second'] / f['bare']['second']:.2f}x |"
        )
        print(
            f"\nfirst call target <= {FIRST_CALL_TARGET}x: {_mark(f['ratio'], FIRST_CALL_TARGET)}"
            f"; whole process (imports + first call) {f['setup_plus_first_ratio']:.2f}x\n"
        )
    print(f"Peak RSS, one {r['size']}-event in-process replay (VmHWM)\n")
    print(
        "| stream | events | bare MiB | bare + pydantic MiB | stream-core MiB "
        "| stream-core / bare | bare + pydantic / bare | stream-core / bare + pydantic |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in r["rss"]:
        print(
            f"| {row['provider']} {row['kind']}, {row['mode']} | {row['events']} "
            f"| {row['bare_kb'] / 1024:.1f} "
            f"| {row['bare_pydantic_kb'] / 1024:.1f} | {row['stream_core_kb'] / 1024:.1f} "
            f"| {row['ratio']:.2f}x | {row['floor_ratio']:.2f}x | {row['over_floor']:.2f}x |"
        )
    worst = max(row["ratio"] for row in r["rss"])
    print(f"\nRSS target <= {RSS_TARGET}x: {_mark(worst, RSS_TARGET)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--rebuild", action="store_true", help="build the venv afresh")
    parser.add_argument("--python", type=Path, help="measure this interpreter (no venv built)")
    parser.add_argument("--size", type=int, default=20000, help="deltas in the RSS replay")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rss-only", action="store_true", help="skip the instruction counts")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind, *rest = args.worker
        if kind == "call":
            _worker_call(rest[0], rest[1], int(rest[2]))
        else:
            _worker_rss(*rest)
        return 0
    python = args.python or build_venv(args.venv, args.rebuild)
    use_valgrind = shutil.which("valgrind") is not None and not args.rss_only
    if not use_valgrind and not args.rss_only:
        print("valgrind not found: instruction counts skipped", file=sys.stderr)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    result = measure(python, args.size, use_valgrind)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_tables(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
