"""`stream_core.testing`: the scripted model and the replay clients a harness tests with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import stream_core
from stream_core import (
    AssistantMessage,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.testing import (
    faux_cut,
    faux_error,
    faux_message,
    faux_model,
    faux_stall,
    faux_text,
    faux_tool_call,
    replay_client,
    replay_sequence,
)

FIXTURES = Path(__file__).parents[1] / "contract_tests" / "fixtures"
NO_RETRY = StreamOptions(max_retries=0)


async def _collect(model: Any, context: Any, options: StreamOptions = NO_RETRY) -> Any:
    async with stream_core.stream(model, context, options) as s:
        events = [e async for e in s]
        message = await s.result()
    assert_valid_event_stream(events)
    return message


def _tool_loop(model: Any) -> list[Any]:
    """A minimal harness: call the model, run any tool it asks for, until it stops."""
    tools = [Tool(name="add", description="add two numbers", parameters={"type": "object"})]
    history: list[Any] = [UserMessage(content="what is 2+3, then 5+4?")]

    async def main() -> None:
        for _ in range(5):
            message = await _collect(model, {"messages": history, "tools": tools})
            history.append(message)
            calls = [b for b in message.content if isinstance(b, ToolCall)]
            if not calls:
                return
            for call in calls:
                total = call.arguments["a"] + call.arguments["b"]
                result = [TextContent(text=str(total))]
                history.append(
                    ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=result)
                )

    anyio.run(main)
    return history


@pytest.mark.parametrize("chunk_size", [None, 1, 4])
def test_faux_model_drives_a_three_turn_tool_loop(chunk_size: int | None) -> None:
    model = faux_model(
        [
            faux_tool_call("add", {"a": 2, "b": 3}, id="c1", text="Adding."),
            faux_tool_call("add", {"a": 5, "b": 4}, id="c2"),
            faux_text("5 and 9.", usage=Usage(input=30, output=4)),
        ],
        chunk_size=chunk_size,
    )
    history = _tool_loop(model)
    final = history[-1]
    assert final.text() == "5 and 9." and final.stop_reason == "stop"
    assert final.usage.input == 30 and final.usage.output == 4
    assert history[1].stop_reason == "tool_use" and history[1].text() == "Adding."
    # What the harness sent each time: the growing history, tool results included.
    assert [len(c.messages) for c in model.contexts] == [1, 3, 5]
    last = model.contexts[2].messages[-1]
    assert isinstance(last, ToolResultMessage) and last.tool_call_id == "c2"
    assert last.content[0].text == "9"  # type: ignore[union-attr]
    assert model.contexts[0].tools[0].name == "add"
    assert model.remaining == 0


def test_chunk_size_splits_deltas_and_keeps_the_message() -> None:
    message = AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[
            ThinkingContent(thinking="let me think", signature="sig"),
            TextContent(text="héllo wörld"),
            ToolCall(id="t", name="f", arguments={"x": [1, 2, "three"]}),
        ],
        usage=Usage(input=3, output=7, reasoning=2),
    )
    whole = anyio.run(
        _collect, faux_model([message]), {"messages": [{"role": "user", "content": "hi"}]}
    )
    for size in (1, 2, 5):
        model = faux_model([faux_message(message)], chunk_size=size)
        split = anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]})
        assert split.content == whole.content
        assert split.usage == whole.usage
    assert [type(b) for b in whole.content] == [ThinkingContent, TextContent, ToolCall]
    assert whole.content[0].signature == "sig"  # type: ignore[union-attr]
    assert whole.stop_reason == "tool_use" and whole.usage.output == 7


def test_exhausted_script_is_an_error_event() -> None:
    model = faux_model(["only one"])
    anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]})
    message = anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]})
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "invalid_request"
    assert "exhausted" in message.error.message


def test_faux_error_kinds_in_stream_and_over_http() -> None:
    model = faux_model([faux_error("rate_limit"), faux_error("auth", status=401)])
    first = anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]})
    assert first.error is not None and first.error.kind == "rate_limit" and first.error.retryable
    second = anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]})
    assert second.error is not None and second.error.kind == "auth"
    assert second.error.status_code == 401


def test_a_retryable_error_is_retried_into_the_next_turn() -> None:
    model = faux_model([faux_error("overloaded"), "recovered"])
    options = StreamOptions(max_retries=1, retry_backoff=0.001)
    message = anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]}, options)
    assert message.text() == "recovered"
    assert len(model.requests) == 2 and len(model.contexts) == 1


def test_stall_hits_the_idle_timeout() -> None:
    model = faux_model([faux_stall("partial answer here", after=1)], chunk_size=7)
    options = StreamOptions(max_retries=0, idle_timeout=0.2)
    message = anyio.run(_collect, model, {"messages": [{"role": "user", "content": "hi"}]}, options)
    assert message.error is not None and message.error.kind == "timeout"
    assert message.text() == "partial answer here"  # the one frame sent before the stall


def test_cut_ends_as_a_network_error_keeping_content() -> None:
    message = anyio.run(
        _collect,
        faux_model([faux_cut("abc", after=1)]),
        {"messages": [{"role": "user", "content": "hi"}]},
    )
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "network"
    assert message.text() == "abc"


def test_faux_model_never_uses_the_callers_client_or_network() -> None:
    model = faux_model(["ok"])
    options = StreamOptions(base_url="http://127.0.0.1:9", max_retries=0)
    assert (
        anyio.run(
            _collect, model, {"messages": [{"role": "user", "content": "hi"}]}, options
        ).text()
        == "ok"
    )


# --- replay -------------------------------------------------------------------------------


def _anthropic_model() -> stream_core.Model:
    return stream_core.Model(
        id="claude-test", api="anthropic-messages", provider="anthropic",
        base_url="https://api.anthropic.com",
    )  # fmt: skip


@pytest.mark.parametrize("chunk_size", [None, 1, 17])
def test_replay_client_serves_a_recording(chunk_size: int | None) -> None:
    path = FIXTURES / "anthropic-messages" / "vercel-ai__anthropic-text.body"
    client = replay_client(path, chunk_size=chunk_size)
    options = StreamOptions(client=client, api_key="k", max_retries=0)
    context = {"messages": [{"role": "user", "content": "x"}]}
    message = anyio.run(_collect, _anthropic_model(), context, options)
    expect = json.loads(path.with_suffix(".json").read_text())["expect"]
    assert message.stop_reason == expect["stop_reason"]
    assert message.text() == "".join(b["text"] for b in expect["content"] if b["type"] == "text")
    assert len(client.requests) == 1
    assert client.requests[0].url.path == "/v1/messages"


def test_replay_status_override_gives_the_error_kind() -> None:
    client = replay_client(b'{"error":{"type":"overloaded_error","message":"busy"}}', status=529)
    options = StreamOptions(client=client, api_key="k", max_retries=0)
    message = anyio.run(
        _collect, _anthropic_model(), {"messages": [{"role": "user", "content": "hi"}]}, options
    )
    assert message.error is not None and message.error.kind == "overloaded"


def test_replay_sequence_serves_turns_in_order_then_fails() -> None:
    folder = FIXTURES / "anthropic-messages"
    client = replay_sequence(
        [folder / "llm-anthropic__test_tools.0.body", folder / "vercel-ai__anthropic-text.body"]
    )
    options = StreamOptions(client=client, api_key="k", max_retries=0)
    first = anyio.run(
        _collect, _anthropic_model(), {"messages": [{"role": "user", "content": "hi"}]}, options
    )
    second = anyio.run(
        _collect, _anthropic_model(), {"messages": [{"role": "user", "content": "hi"}]}, options
    )
    third = anyio.run(
        _collect, _anthropic_model(), {"messages": [{"role": "user", "content": "hi"}]}, options
    )
    assert first.stop_reason == "tool_use"
    assert second.stop_reason == "stop"
    assert third.error is not None and "no recording for request 3" in third.error.message
