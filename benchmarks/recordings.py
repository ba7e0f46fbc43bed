"""Instructions per event on real recordings, under valgrind's cachegrind.

    python benchmarks/recordings.py [--apis API ...] [--names FILE] [--reps 3 13] [--json]
    python benchmarks/recordings.py --single API REPS [--names FILE]

run.py and cachegrind.py measure large synthetic streams; this replays the contract
recordings (`contract_tests/fixtures/<api>/`, every one that ends without an HTTP error)
through `stream_core.stream`, each `REPS` times in one process, and counts

    instructions per event = (I(reps large) - I(reps small)) / (events(large) - events(small))

so start-up, imports and bodies read from disk cancel out, and the figure holds each
call's own cost spread over its events (recordings are short: most are a few dozen events).
`--names FILE` restricts the replay to the recordings named in FILE (one `api/name` per
line), so two checkouts measure exactly the same set (e.g. the recordings an older commit
had, before new ones were added). Run it from each checkout with that checkout's venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import run as bench  # benchmarks/run.py: a script's own directory is on sys.path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "contract_tests" / "fixtures"
_I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _recordings(api: str, names: set[str] | None) -> list[tuple[str, bytes, dict[str, Any]]]:
    out = []
    for meta_path in sorted((FIXTURES / api).glob("*.json")):
        name = meta_path.stem
        if names is not None and f"{api}/{name}" not in names:
            continue
        meta = json.loads(meta_path.read_text())
        if int(meta.get("status") or 200) != 200:
            continue
        headers = meta.get("headers") or {}
        if str(headers.get("content-type", "")).startswith("application/json"):
            continue  # a non-streamed answer: no events to speak of
        body = (FIXTURES / api / f"{name}.body").read_bytes()
        out.append((name, body, meta))
    return out


async def _replay(api: str, body: bytes, meta: dict[str, Any]) -> int:
    import httpx

    import stream_core
    from stream_core import Context, Model, StreamOptions, UserMessage

    # The recording's own content type (no codec loaded in the process measured).
    media = str((meta.get("headers") or {}).get("content-type") or bench.sniff_media(body))

    async def serve() -> Any:
        yield body

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": media}, content=serve())

    model = Model(id="bench", api=api, provider="bench", base_url="https://bench.invalid")
    context = Context(messages=[UserMessage(content="hi")])
    n = 0
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        options = StreamOptions(client=client, api_key="bench", max_retries=0)
        async with stream_core.stream(model, context, options) as s:
            async for _event in s:
                n += 1
            await s.result()
    return n


def single(api: str, reps: int, names: set[str] | None) -> int:
    """Replay every recording of `api` `reps` times; the events seen."""
    recordings = _recordings(api, names)

    async def main() -> int:
        total = 0
        for _ in range(reps):
            for _name, body, meta in recordings:
                total += await _replay(api, body, meta)
        return total

    return asyncio.run(main())


def _instructions(argv: list[str]) -> tuple[int, int]:
    with tempfile.NamedTemporaryFile(suffix=".cg") as out:
        done = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no",
             f"--cachegrind-out-file={out.name}", *argv],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    found = _I_REFS.search(done.stderr)
    if found is None:
        raise RuntimeError("no summary line in cachegrind's output")
    events = int(done.stdout.strip().splitlines()[-1])
    return int(found.group(1).replace(",", "")), events


def measure(api: str, reps: tuple[int, int], names_file: str | None) -> dict[str, Any]:
    base = [sys.executable, __file__, "--single", api]
    extra = ["--names", names_file] if names_file else []
    small = _instructions([*base, str(reps[0]), *extra])
    large = _instructions([*base, str(reps[1]), *extra])
    events = large[1] - small[1]
    names = set(Path(names_file).read_text().split()) if names_file else None
    return {
        "api": api,
        "recordings": len(_recordings(api, names)),
        "events": events,
        "instructions_per_event": round((large[0] - small[0]) / events) if events else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--single", nargs=2, metavar=("API", "REPS"))
    parser.add_argument("--apis", nargs="*", default=list(bench.PROVIDERS))
    parser.add_argument("--names", help="only the recordings named in this file (api/name)")
    parser.add_argument("--reps", nargs=2, type=int, default=[3, 13])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = set(Path(args.names).read_text().split()) if args.names else None
    if args.single:
        print(single(args.single[0], int(args.single[1]), names))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed for instruction counts")
    rows = [measure(api, (args.reps[0], args.reps[1]), args.names) for api in args.apis]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'api':28} {'recordings':>10} {'events':>8} {'instr/event':>12}")
    for r in rows:
        print(
            f"{r['api']:28} {r['recordings']:>10} {r['events']:>8} "
            f"{r['instructions_per_event']:>12,}"
        )


if __name__ == "__main__":
    main()
