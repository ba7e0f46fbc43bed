"""A safe compaction cut (issue 28, point 4), from the user's side: `compaction_cut` never
separates a tool call from its result nor drops the last user turn; `compact` replaces the
earlier turns with one `CompactionSummary` carrying their usage, so session totals
survive; a 40-turn session with parallel tool calls compacts three times and resumes from
JSONL on another vendor with every call paired."""

from __future__ import annotations

import io
import json

import anyio
import httpx
import pytest
import respx

from stream_core import (
    AssistantMessage,
    CompactionSummary,
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    audit_tool_pairs,
    compact,
    compaction_cut,
    complete,
    dump_messages,
    estimate_context_tokens,
    execute_tool_calls,
    load_messages,
    messages_only,
    total_usage,
)
from stream_core.testing import faux_model, faux_text


def _assistant(*calls: str, text: str = "") -> AssistantMessage:
    content: list[object] = [TextContent(text=text)] if text else []
    content += [ToolCall(id=c, name="look", arguments={"q": c}) for c in calls]
    return AssistantMessage(
        api="faux", provider="faux", model="m", content=content,
        stop_reason="tool_use" if calls else "stop",
        usage=Usage(input=100, output=10),
    )  # fmt: skip


def _result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="look", content="x" * 400)


HISTORY = [
    UserMessage(content="first " * 50),
    _assistant("a1", "a2"),
    _result("a1"),
    _result("a2"),
    _assistant(text="done " * 50),
    UserMessage(content="second " * 50),
    _assistant("b1", "b2", "b3"),
    _result("b1"),
    _result("b2"),
    _result("b3"),
]


@pytest.mark.parametrize("keep", [0, 50, 100, 150, 200, 300, 400, 600, 10_000])
def test_the_cut_never_splits_a_call_from_its_result(keep: int) -> None:
    cut = compaction_cut(HISTORY, keep)
    kept = HISTORY[cut:]
    assert audit_tool_pairs(kept).ok, (keep, cut)
    assert cut <= 5  # the last user message is always kept


def test_nothing_to_cut_and_bad_budgets() -> None:
    assert compaction_cut([UserMessage(content="hi")], 0) == 0
    assert compaction_cut([], 100) == 0
    with pytest.raises(ValueError, match="keep_tokens"):
        compaction_cut(HISTORY, -1)


def test_compact_keeps_the_system_prompt_and_the_session_totals() -> None:
    context = Context(system_prompt="Be brief.", messages=list(HISTORY))
    before = total_usage(context.messages)
    smaller = compact(context, "they looked at a1, a2", keep_tokens=400)
    assert smaller.system_prompt == "Be brief."
    assert isinstance(smaller.messages[0], CompactionSummary)
    assert smaller.messages[0].tokens_before and smaller.messages[0].usage is not None
    assert total_usage(smaller.messages) == before
    assert estimate_context_tokens(smaller) < estimate_context_tokens(context)
    assert context.messages == HISTORY  # the caller's context is not changed


def test_a_long_session_compacts_three_times_and_resumes_on_another_vendor() -> None:
    turns: list[object] = []
    for i in range(40):
        calls = [ToolCall(id=f"c{i}-{k}", name="look", arguments={"q": k}) for k in range(3)]
        turns.append(  # three parallel calls
            AssistantMessage(
                api="faux",
                provider="faux",
                model="agent",
                content=calls,
                stop_reason="tool_use",
                usage=Usage(input=500, output=40),
            )  # fmt: skip
        )
        turns.append(faux_text(f"answer {i} " * 30, usage=Usage(input=600, output=80)))
    agent = faux_model(turns, prices=ModelPrices(input=1.0, output=2.0))
    summarizer = faux_model(
        [faux_text(f"summary {n}", usage=Usage(input=2000, output=50)) for n in range(10)],
        prices=ModelPrices(input=1.0, output=2.0),
    )
    context = Context(system_prompt="You are a careful agent.", messages=[])
    spent: list[AssistantMessage] = []
    compactions = 0

    async def run() -> None:
        nonlocal context, compactions
        for i in range(40):
            context.messages.append(UserMessage(content=f"task {i} " * 20))
            while True:
                message = await complete(agent, context)
                spent.append(message)
                context.messages.append(message)
                if not message.tool_calls():
                    break
                context.messages += await execute_tool_calls(
                    message, {"look": lambda call: "seen " * 60}
                )
            if estimate_context_tokens(context) > 6_000:
                summary = await complete(
                    summarizer, Context(messages=[UserMessage(content="Summarize.")])
                )
                spent.append(summary)
                context = compact(context, summary.text(), keep_tokens=2_000)
                compactions += 1

    anyio.run(run)
    assert compactions >= 3
    assert audit_tool_pairs(messages_only(context.messages)).ok
    # JSONL round trip, then one more turn on another vendor (Chat Completions on the wire).
    buffer = io.StringIO()
    dump_messages(context.messages, buffer)
    buffer.seek(0)
    resumed = Context(
        system_prompt=context.system_prompt, messages=messages_only(load_messages(buffer))
    )
    assert total_usage(resumed.messages) == total_usage(context.messages)
    other = Model(
        id="gpt-x", api="openai-completions", provider="openai", base_url="https://o.test/v1"
    )
    body = (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
        b'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    resumed.messages.append(UserMessage(content="Where were we?"))
    with respx.mock:
        route = respx.post("https://o.test/v1/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
        answer = anyio.run(complete, other, resumed, StreamOptions(api_key="k"))
    assert answer.text() == "ok"
    sent = json.loads(route.calls[0].request.content)
    assert sent["messages"][0] == {"role": "system", "content": "You are a careful agent."}
    assert "compacted into this summary" in json.dumps(sent["messages"][1])
    calls = {c["id"] for m in sent["messages"] for c in m.get("tool_calls", [])}
    results = {m["tool_call_id"] for m in sent["messages"] if m["role"] == "tool"}
    assert calls == results and calls  # every call kept has its result, and back
