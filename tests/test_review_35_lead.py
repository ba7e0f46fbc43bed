"""What the lead's review of issue 35 found, written from the user's side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream_core.contract_tests.kit import Fixture, check_expect, replay, whole

FIXTURES = Path(__file__).resolve().parent.parent / "contract_tests" / "fixtures"


@pytest.mark.parametrize(
    "name",
    [
        "vercel-ai__anthropic-code-execution-20250825.pptx-skill",
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.0",
    ],
)
def test_an_answer_showing_server_tools_keeps_its_multi_round_input(name: str) -> None:
    """A recording replayed without the request that asked for the server tools (as a
    user replays a vendor's stream, or a tool asked for through a native form) still
    reports the input the vendor counted over its sampling rounds (320,032 and 404,500
    tokens, past a 128k window): the answer itself shows the vendor ran a server tool."""
    folder = FIXTURES / "anthropic-messages"
    meta = json.loads((folder / f"{name}.json").read_text())
    meta.pop("request_tools", None)
    body = (folder / f"{name}.body").read_bytes()
    run = replay(Fixture("anthropic-messages", name, body, meta), whole(body))
    check_expect(run.message, meta["expect"])
    assert run.message.usage.clamped is None


def test_a_later_answer_without_a_container_keeps_the_earlier_one() -> None:
    """Code execution made files in a container; the next answer used no tool (no container
    in it): the request after still reuses the container, not a fresh empty one."""
    import httpx
    import respx

    import stream_core
    from stream_core import AssistantMessage, Context, StreamOptions, TextContent, UserMessage

    model = stream_core.get_model("anthropic", "claude-sonnet-4-5")
    ran = AssistantMessage(
        api=model.api,
        provider=model.provider,
        model=model.id,
        content=[TextContent(text="Wrote report.csv")],
        container={"id": "container_011", "expires_at": "2026-12-06T05:00:00Z"},
    )
    later = AssistantMessage(
        api=model.api, provider=model.provider, model=model.id, content=[TextContent(text="ok")]
    )
    context = Context(
        messages=[
            UserMessage(content="make a csv"),
            ran,
            UserMessage(content="thanks"),
            later,
            UserMessage(content="now chart it"),
        ]
    )
    sent: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(400, json={"type": "error", "error": {"type": "x", "message": "x"}})

    with respx.mock(assert_all_mocked=True) as mock:
        mock.route().mock(side_effect=answer)
        stream_core.complete_sync(model, context, StreamOptions(api_key="k-test", max_retries=0))
    assert sent and sent[0].get("container") == "container_011"


def test_tool_checks_take_the_context_tools_as_they_are() -> None:
    """`Context.tools` holds server tools beside functions; a built-in call (the vendor's
    shell item) is no function tool: checking and executing must neither crash nor refuse."""
    from stream_core import (
        AssistantMessage,
        ServerTool,
        Tool,
        ToolCall,
        check_tool_calls,
        execute_tool_calls_sync,
    )

    tools = [Tool(name="get_time"), ServerTool(kind="web_search")]
    message = AssistantMessage(
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="tool_use",
        content=[
            ToolCall(id="c1", name="get_time", arguments={}),
            ToolCall(id="c2", name="shell", arguments={"commands": ["ls"]}, builtin="shell_call"),
            ToolCall(id="c3", name="nope", arguments={}),
        ],
    )
    refused = check_tool_calls(message, tools)
    assert [r.tool_call_id for r in refused] == ["c3"]
    results = execute_tool_calls_sync(
        message, {"get_time": lambda c: "12:00", "shell": lambda c: "a.txt"}, tools=tools
    )
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("c1", False),
        ("c2", False),
        ("c3", True),
    ]


def test_contract_model_takes_an_id() -> None:
    from stream_core.contract_tests.kit import contract_model

    assert contract_model("anthropic-messages", id="claude-x").id == "claude-x"
