"""The same eval as streams and as a vendor batch, side by side on one loopback vendor;
the crash test's table and the fidelity table (issue 37, "Benchmarks and proof").

    uv run python benchmarks/batch.py [--prompts 1000] [--concurrency 32] [--apis NAME ...]
        [--batch-delay 0.3] [--only eval crash fidelity] [--out PATH] [--json PATH]

**eval**: per API (`--apis`, default `anthropic`; `all`: every API whose batch codec and
fake-vendor routes exist), `--prompts` prompts of the issue's eval, two requests each
(2,000 at the default): a tool call (the model calls `get_weather`), then, with the tool's
result, a structured answer (`output_schema`). Both sides send the same `(model, context,
options)` to the same `stream_core.testing.fake_vendor` on 127.0.0.1, whose scripted
turns answer every first request with the tool call and every second with the answer:

- **streams**: `complete()` per request, `--concurrency` prompts at once, each prompt's
  two calls in turn, each result written to a JSONL as it arrives;
- **batch**: `stream_core.batch.submit` of every first request, `collect`, then every
  second request (built from each prompt's first result), `submit`, `collect`; the fake
  ends a batch `--batch-delay` seconds after its create (a real vendor takes minutes to
  hours: the batch's wall time here is the client's share and the fake's delay, not a
  vendor's).

Reported per side: requests, result rows, rows lost (requests with no row; must be 0),
total cost (streams at the model's price, the batch at the vendor's batch price,
`stream_core._cost.BATCH_PRICE`), wall time; and rows identical (each prompt's batch
message against its streamed one, less timing, cost at the batch price).

**crash**: tests/batch/crash_run.py for every API and kill point: a child process
submitting and collecting 6 requests, SIGKILLed at the point, then restarted (see its
docstring); per API: points passed, batches created per part, orphans, rows, files left.

**fidelity**: tests/batch/fidelity_run.py for every API: text, thinking, a tool call, a
structured answer and a length cut, streamed and batched from one script, compared.

Markdown goes to stdout and to `--out` (benchmarks/results/batch.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "batch"))

from batch_apis import API, APIS, available, by_name, environment  # noqa: E402
from crash_run import POINTS, Outcome, crash  # noqa: E402
from fidelity_run import VERDICT, WEATHER, Compared, compare, fidelity  # noqa: E402

from stream_core import (  # noqa: E402
    AssistantMessage,
    Context,
    StreamOptions,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    complete,
)
from stream_core.batch import BatchRequest, submit  # noqa: E402
from stream_core.batch._plans import wire_of  # noqa: E402
from stream_core.provider import output_spec  # noqa: E402
from stream_core.testing import FauxTurn, fake_vendor, faux_text, faux_tool_call  # noqa: E402

# --- the eval ------------------------------------------------------------------------------


def _answers(api: API, prompts: int) -> tuple[FauxTurn, FauxTurn]:
    """The tool call every first request gets, the structured answer every second gets."""
    model = api.model()
    tool = faux_tool_call(
        "get_weather", {"city": "Paris"}, id="call_w1", usage=Usage(input=210, output=24)
    )
    spec = output_spec(wire_of(model), model, api.options("http://x", output_schema=VERDICT))
    assert spec is not None
    verdict = {"answer": "sunny", "score": 4}
    usage = Usage(input=290, output=18)
    if spec.mode == "tool":
        return tool, faux_tool_call(spec.name, verdict, id="call_o1", usage=usage)
    return tool, faux_text(json.dumps(verdict), usage=usage)


def _first(i: int) -> Context:
    question = f"Prompt {i}: what should I wear in Paris today? Use the tool."
    return Context(messages=[UserMessage(content=question, timestamp=0)], tools=[WEATHER])


def _second(i: int, call: AssistantMessage) -> Context:
    first = _first(i)
    tool = next((c for c in call.content if isinstance(c, ToolCall)), None)
    messages: list[Any] = [*first.messages, call]
    if tool is not None:
        messages.append(
            ToolResultMessage(
                tool_call_id=tool.id, tool_name=tool.name, content="18 C, clear", timestamp=0
            )
        )
    return Context(messages=messages, tools=first.tools)


def _cost(m: AssistantMessage) -> float:
    return m.usage.cost.total if m.usage.cost is not None else 0.0


def _write(path: Path, cid: str, m: AssistantMessage) -> None:
    with path.open("a") as f:
        f.write(json.dumps({"id": cid, "message": m.model_dump(mode="json")}) + "\n")


async def _batch(api: API, url: str, prompts: int, store: str) -> dict[str, AssistantMessage]:
    model = api.model()
    settings = api.settings(url)
    first = [BatchRequest(f"p{i}-tool", model, _first(i), api.options(url)) for i in range(prompts)]
    job = await submit(first, store=store, name="eval-tool", settings=settings)
    got = {r.custom_id: r.message for r in await job.collect(interval=0.05)}
    opts: StreamOptions = api.options(url, output_schema=VERDICT)
    second = [
        BatchRequest(f"p{i}-answer", model, _second(i, got[f"p{i}-tool"]), opts)
        for i in range(prompts)
        if f"p{i}-tool" in got
    ]
    job = await submit(second, store=store, name="eval-answer", settings=settings)
    got.update({r.custom_id: r.message for r in await job.collect(interval=0.05)})
    return got


def run_eval(api: API, prompts: int, concurrency: int, delay: float) -> dict[str, Any]:
    tool, answer = _answers(api, prompts)
    model = api.model()
    script = [tool] * prompts + [answer] * prompts
    ids = [f"p{i}-{k}" for i in range(prompts) for k in ("tool", "answer")]
    with (
        tempfile.TemporaryDirectory() as tmp,
        fake_vendor(scenarios={model.id: script + script}, batch_delay=delay) as server,
    ):
        # The streams' first round takes the tool calls, their second the answers: each
        # side's calls are split by round so the scripted order fits any arrival order.
        t0 = time.perf_counter()
        streamed = anyio.run(_two_rounds, api, server.url, prompts, concurrency, Path(tmp))
        t_stream = time.perf_counter() - t0
        t0 = time.perf_counter()
        batched = anyio.run(_batch, api, server.url, prompts, str(Path(tmp) / "jobs"))
        t_batch = time.perf_counter() - t0
    compared = [compare(api.name, cid, streamed[cid], batched[cid])
                for cid in ids if cid in streamed and cid in batched]  # fmt: skip
    return {
        "api": api.name,
        "model": f"{model.provider}/{model.id}",
        "requests": len(ids),
        "stream_rows": len(streamed),
        "batch_rows": len(batched),
        "stream_lost": len(set(ids) - set(streamed)),
        "batch_lost": len(set(ids) - set(batched)),
        "stream_cost": sum(_cost(m) for m in streamed.values()),
        "batch_cost": sum(_cost(m) for m in batched.values()),
        "stream_wall": t_stream,
        "batch_wall": t_batch,
        "identical": sum(c.identical for c in compared),
        "diffs": sorted({d.split(":")[0] for c in compared for d in c.diffs})[:5],
        "errors": sum(m.stop_reason == "error" for m in [*streamed.values(), *batched.values()]),
    }


async def _two_rounds(
    api: API, url: str, prompts: int, concurrency: int, tmp: Path
) -> dict[str, AssistantMessage]:
    """Streams, `concurrency` at once: every prompt's tool call, then every answer (the
    fake's script hands out answers in arrival order; see `run_eval`)."""
    model = api.model()
    out = tmp / "streams.jsonl"
    got: dict[str, AssistantMessage] = {}
    gate = anyio.Semaphore(concurrency)

    async def call(cid: str, ctx: Context, opts: StreamOptions) -> None:
        async with gate:
            m = await complete(model, ctx, opts)
        got[cid] = m
        _write(out, cid, m)

    async with anyio.create_task_group() as tg:
        for i in range(prompts):
            tg.start_soon(call, f"p{i}-tool", _first(i), api.options(url))
    opts = api.options(url, output_schema=VERDICT)
    async with anyio.create_task_group() as tg:
        for i in range(prompts):
            tg.start_soon(call, f"p{i}-answer", _second(i, got[f"p{i}-tool"]), opts)
    return got


# --- the tables ----------------------------------------------------------------------------


def eval_table(rows: list[dict[str, Any]], prompts: int, concurrency: int, delay: float) -> str:
    lines = [
        f"### The eval: {prompts:,} prompts x (a tool call, then a structured answer)",
        "",
        f"Streams: `complete()`, {concurrency} at once. Batch: two jobs (the tool calls, then "
        f"the answers), the fake ending each batch {delay} s after its create.",
        "",
        "| API | side | requests | rows | lost | cost (USD) | wall (s) | rows identical |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = r["batch_cost"] / r["stream_cost"] if r["stream_cost"] else float("nan")
        lines.append(
            f"| {r['api']} | streams | {r['requests']:,} | {r['stream_rows']:,} | "
            f"{r['stream_lost']} | {r['stream_cost']:.4f} | {r['stream_wall']:.1f} | |"
        )
        lines.append(
            f"| {r['api']} | batch | {r['requests']:,} | {r['batch_rows']:,} | "
            f"{r['batch_lost']} | {r['batch_cost']:.4f} ({ratio:.2f}x) | {r['batch_wall']:.1f} | "
            f"{r['identical']:,} / {r['requests']:,} |"
        )
    return "\n".join(lines)


def crash_table(outcomes: list[Outcome]) -> str:
    lines = [
        "### The crash test: SIGKILL at each step, restart, collect",
        "",
        "Per API and kill point: `ok` when the restart wrote every request's row once, the "
        "vendor created one batch per part, no batch is left uncollected and uncancelled, "
        "and the budget spent equals the results' cost (the hold settled once).",
        "",
        "| API | " + " | ".join(POINTS) + " |",
        "| --- | " + " | ".join("---" for _ in POINTS) + " |",
    ]
    by_api: dict[str, dict[str, Outcome]] = {}
    for o in outcomes:
        by_api.setdefault(o.api, {})[o.point] = o
    for api, points in by_api.items():
        cells = [_cell(points[p]) if p in points else "" for p in POINTS]
        lines.append(f"| {api} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`n/a`: the API uploads nothing before its create. `+N f`: N files (inputs, results) "
        "left on the vendor after the restart. `**hold**`: every row once and no orphan, "
        "but the budget hold was not settled. Restarted by: "
        + ", ".join(f"{p} `{r}`" for p, r in _restarts().items())
        + ".",
    ]
    bad = [o for o in outcomes if o.skipped is None and not o.ok]
    for o in bad:
        lines.append(
            f"- {o.api} {o.point}: rows {o.rows}/{o.n} (unique {o.unique}), created "
            f"{o.created} for {o.parts} part(s), orphans {o.orphans}, spent ${o.spent:.6f} "
            f"vs cost ${o.cost:.6f}, settled {o.settled}x{(' ' + o.error[:200]) if o.error else ''}"
        )
    return "\n".join(lines)


def _restarts() -> dict[str, str]:
    from crash_run import RESTART

    return RESTART


def _cell(o: Outcome) -> str:
    if o.skipped is not None:
        return "n/a"
    files = f" +{o.files_left} f" if o.files_left else ""
    if o.ok:
        return "ok" + files
    if o.rows == o.n == o.unique and o.created == o.parts and not o.orphans:
        return "**hold**" + files
    return "**FAIL**" + files


def fidelity_table(compared: list[Compared]) -> str:
    cases = ["text", "thinking", "tool_call", "structured", "length"]
    lines = [
        "### Fidelity: a batch result against the streamed answer of the same script",
        "",
        "`=`: the two messages' `model_dump` are identical less timing (`ttft_ms`, "
        "`duration_ms`, `timestamp`), and each cost field is the stream's x the batch "
        "price; `-`: the API carries no reasoning.",
        "",
        "| API | " + " | ".join(cases) + " | batch cost / stream cost |",
        "| --- | " + " | ".join("---" for _ in cases) + " | ---: |",
    ]
    by_api: dict[str, dict[str, Compared]] = {}
    for c in compared:
        by_api.setdefault(c.api, {})[c.case] = c
    for api, found in by_api.items():
        cells = [
            "-" if k not in found else ("=" if found[k].identical else "**differs**") for k in cases
        ]
        s = sum(c.stream_cost for c in found.values())
        b = sum(c.batch_cost for c in found.values())
        lines.append(f"| {api} | " + " | ".join(cells) + f" | {b / s:.3f} |")
    for c in compared:
        if not c.identical:
            lines.append(f"- {c.api} {c.case}: " + "; ".join(c.diffs[:3]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--apis", nargs="+", default=["anthropic"])
    parser.add_argument("--batch-delay", type=float, default=0.3)
    parser.add_argument("--only", nargs="+", default=["eval", "crash", "fidelity"])
    parser.add_argument("--jobs", type=int, default=4, help="crash runs at once")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "batch.md")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    ready = available()
    missing = [f"{a.name} ({a.missing()})" for a in APIS if a not in ready]
    for api in [a for a in ready if a.s3]:
        try:
            found, unset = environment(api)  # Bedrock: a moto server, a bucket
        except BaseException as exc:  # noqa: BLE001 - moto_server skips (pytest's Skipped)
            ready.remove(api)
            missing.append(f"{api.name} (no S3 server: {exc})")
            continue
        for name in unset:
            os.environ.pop(name, None)
        os.environ.update(found)
    eval_apis = ready if args.apis == ["all"] else [by_name(n) for n in args.apis]
    sections = [
        "## Batches against streams (benchmarks/batch.py)",
        "",
        f"APIs with a batch codec here: {', '.join(a.name for a in ready)}"
        + (f"; not yet: {', '.join(missing)}" if missing else "")
        + ".",
    ]
    report: dict[str, Any] = {}
    if "eval" in args.only:
        rows = [run_eval(a, args.prompts, args.concurrency, args.batch_delay) for a in eval_apis]
        report["eval"] = rows
        sections += ["", eval_table(rows, args.prompts, args.concurrency, args.batch_delay)]
    if "crash" in args.only:
        with tempfile.TemporaryDirectory() as tmp:
            runs = [(a, p, Path(tmp) / f"{a.name}-{p}") for a in ready for p in POINTS]
            with ThreadPoolExecutor(args.jobs) as pool:
                outcomes = list(pool.map(lambda r: crash(*r), runs))
        report["crash"] = [o.__dict__ | {"ok": o.ok} for o in outcomes]
        sections += ["", crash_table(outcomes)]
    if "fidelity" in args.only:
        compared = [c for a in ready for c in fidelity(a)]
        report["fidelity"] = [c.__dict__ for c in compared]
        sections += ["", fidelity_table(compared)]
    text = "\n".join(sections) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
