"""One script answered twice by the same fake vendor, streamed and as a batch, and the two
messages compared (tests/batch/test_fidelity.py asserts; benchmarks/batch.py prints the
table).

Cases: a text answer; thinking then text (where the API carries reasoning); a tool call;
a structured answer (a native JSON answer, or the forced output tool where the model has
no native mode, as `stream()` plans it); an answer cut at `max_tokens` (`length`). Each
is sent with the same `(model, context, options)` both ways: `stream()` first, then one
batch of every case, whose requests take the same scripted answers in the same order.

Compared: `model_dump(mode="json")` of both, less the timing fields (`ttft_ms`,
`duration_ms`, `timestamp`: a batch has no stream to time), less a response or request id
only one path carries (noted), and with the cost apart: every field of the batch's cost
must be the stream's times the vendor's batch price (`BATCH_PRICE`).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from typing import Any

import anyio
from batch_apis import API

from stream_core import (
    AssistantMessage,
    Context,
    TextContent,
    ThinkingContent,
    Tool,
    Usage,
    UserMessage,
    stream,
)
from stream_core._cost import BATCH_PRICE
from stream_core.batch import BatchRequest, submit
from stream_core.batch._plans import wire_of
from stream_core.provider import output_spec
from stream_core.testing import FauxTurn, fake_vendor, faux_message, faux_text, faux_tool_call

__all__ = ["CASES", "Compared", "compare", "fidelity"]

CASES = ["text", "thinking", "tool_call", "structured", "length"]
TIMING = ("ttft_ms", "duration_ms", "timestamp")
IDS = ("response_id", "request_id")

WEATHER = Tool(
    name="get_weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
VERDICT: dict[str, Any] = {
    "title": "Verdict",
    "type": "object",
    "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["answer", "score"],
    "additionalProperties": False,
}


def _message(content: list[Any], usage: Usage, stop: str = "stop") -> AssistantMessage:
    return AssistantMessage(
        api="faux", provider="faux", model="faux", content=content, usage=usage,
        stop_reason=stop,  # type: ignore[arg-type]
    )  # fmt: skip


@dataclass
class Case:
    name: str
    context: Context
    options: dict[str, Any]
    turn: FauxTurn


def cases(api: API) -> list[Case]:
    """The script for `api` (no thinking case where it carries no reasoning)."""
    model = api.model()
    ask = Context(messages=[UserMessage(content="Is the sky blue? Answer in a word.")])
    tools = Context(
        messages=[UserMessage(content="What is the weather in Paris?")], tools=[WEATHER]
    )
    found = [
        Case("text", ask, {}, faux_text("Yes.", usage=Usage(input=120, output=9))),
        Case(
            "tool_call",
            tools,
            {},
            faux_tool_call(
                "get_weather", {"city": "Paris"}, id="call_w1", usage=Usage(input=180, output=25)
            ),
        ),
    ]
    if api.thinking:
        think = _message(
            [ThinkingContent(thinking="Rayleigh scattering.", signature="sig-abc"),
             TextContent(text="Yes.")],
            Usage(input=130, output=60, reasoning=40),
        )  # fmt: skip
        found.insert(1, Case("thinking", ask, {"reasoning": "low"}, faux_message(think)))
    opts = api.options("http://x.invalid", output_schema=VERDICT)
    spec = output_spec(wire_of(model), model, opts)
    assert spec is not None
    verdict = {"answer": "yes", "score": 3}
    usage = Usage(input=150, output=14)
    if spec.mode == "tool":
        turn = faux_tool_call(spec.name, verdict, id="call_o1", usage=usage)
    else:
        turn = faux_text(json.dumps(verdict), usage=usage)
    found.append(Case("structured", ask, {"output_schema": VERDICT}, turn))
    cut = _message([TextContent(text="The sky is blue because")], Usage(input=60, output=16))
    cut.stop_reason = "length"
    found.append(Case("length", ask, {"max_tokens": 16}, faux_message(cut)))
    return found


@dataclass
class Compared:
    """One case's two messages, compared."""

    api: str
    case: str
    identical: bool
    diffs: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    """Id fields one path carries and the other does not (left out of the comparison)."""
    stream_cost: float = 0.0
    batch_cost: float = 0.0
    stop: str = ""
    blocks: str = ""
    output: Any = None
    """The batch message's structured answer (`AssistantMessage.output`)."""


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: stream {json.dumps(a)[:80]} != batch {json.dumps(b)[:80]}")


def compare(api: str, case: str, streamed: AssistantMessage, batched: AssistantMessage) -> Compared:
    s, b = streamed.model_dump(mode="json"), batched.model_dump(mode="json")
    for k in TIMING:
        s.pop(k, None)
        b.pop(k, None)
    dropped = []
    for k in IDS:
        if (s.get(k) is None) != (b.get(k) is None):
            dropped.append(k)
            s.pop(k, None)
            b.pop(k, None)
    sc, bc = s["usage"].pop("cost", None), b["usage"].pop("cost", None)
    diffs: list[str] = []
    _diff(s, b, "message", diffs)
    price = BATCH_PRICE[streamed.provider]
    if (sc is None) != (bc is None):
        diffs.append(f"usage.cost: stream {sc} batch {bc}")
    elif sc is not None and bc is not None:
        for k in sorted(set(sc) | set(bc)):
            want = float(sc.get(k) or 0.0) * price
            got = float(bc.get(k) or 0.0)
            if abs(got - want) > 1e-12 + 1e-9 * abs(want):
                diffs.append(f"usage.cost.{k}: batch {got} != stream {sc.get(k)} x {price}")
    return Compared(
        api, case, not diffs, diffs, dropped,
        stream_cost=(sc or {}).get("total", 0.0), batch_cost=(bc or {}).get("total", 0.0),
        stop=str(batched.stop_reason), blocks="+".join(c.type for c in batched.content),
        output=batched.output,
    )  # fmt: skip


def fidelity(api: API, *, delay: float = 0.05) -> list[Compared]:
    """Every case of `api`, streamed then batched on one fake vendor, compared. Where the
    vendor takes more requests a batch (Bedrock: 100), the batch is filled up with plain
    requests after the cases (answered `ok`, not compared)."""
    model = api.model()
    script = cases(api)
    turns = [c.turn for c in script]
    pad = max(api.min_requests() - len(script), 0)
    filler = [faux_text("ok", usage=Usage(input=5, output=1))] * pad
    with (
        fake_vendor(scenarios={model.id: turns + turns + filler}, batch_delay=delay) as server,
        tempfile.TemporaryDirectory() as store,
    ):
        api.prepare(server)

        async def run() -> tuple[list[AssistantMessage], list[AssistantMessage]]:
            streamed = []
            for c in script:
                s = stream(model, c.context, api.options(server.url, **c.options))
                async for _ in s:
                    pass
                streamed.append(await s.result())
            requests = [
                BatchRequest(c.name, model, c.context, api.options(server.url, **c.options))
                for c in script
            ]
            ask = Context(messages=[UserMessage(content="Say ok.")])
            requests += [
                BatchRequest(f"fill{i}", model, ask, api.options(server.url)) for i in range(pad)
            ]
            job = await submit(
                requests, store=store, name="fidelity", settings=api.settings(server.url)
            )
            results = {r.custom_id: r.message for r in await job.collect(interval=0.05)}
            return streamed, [results[c.name] for c in script]

        streamed, batched = anyio.run(run)
    return [
        compare(api.name, c.name, s, b) for c, s, b in zip(script, streamed, batched, strict=True)
    ]
