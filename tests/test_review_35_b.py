"""Review of issue 35 (OpenAI Responses side), from a user's side: caller-run built-in
calls open when the vendor starts them, a computer-use call is a tool call the harness
runs and answers with a screenshot, and what goes back is the item the vendor requires."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx

from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import contract_model, options, run_provider, sse_response

API = "openai-responses"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
COMPLETED = {
    "type": "response.completed",
    "response": {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [],
        "usage": {"input_tokens": 5, "output_tokens": 5},
    },
}


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _item_events(item: dict[str, Any], added: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    start = added if added is not None else {**item, "status": "in_progress"}
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": start},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
    ]


def _stream(body: bytes) -> tuple[list[Any], AssistantMessage]:
    async def main() -> Any:
        return await run_provider(API, [sse_response([body])])

    run = anyio.run(main)
    return run.events, run.message


def _payload(context: Context) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return sse_response([_sse(COMPLETED)])

    async def main() -> None:
        await run_provider(API, answer, context=context, opts=options())

    anyio.run(main)
    return seen[0]


def _deltas(events: list[Any]) -> list[str]:
    return [e.delta.type for e in events if e.type == "message_update"]


SHELL = {
    "type": "shell_call",
    "id": "sh_1",
    "call_id": "call_sh1",
    "status": "completed",
    "action": {"commands": ["ls -a"], "max_output_length": 4096, "timeout_ms": None},
}


def test_a_shell_call_opens_when_the_vendor_starts_it() -> None:
    added = {"type": "shell_call", "id": "sh_1", "call_id": "call_sh1", "status": "in_progress"}
    [added_event, done_event] = _item_events(SHELL, added)
    # The stream is cut after `output_item.added`: a UI has already seen the call start.
    events, message = _stream(_sse(added_event))
    assert _deltas(events)[:1] == ["toolcall_start"]
    assert_valid_event_stream(events)
    # Whole: one call, started once, with the finished item's input.
    events, message = _stream(_sse(added_event, done_event, COMPLETED))
    assert_valid_event_stream(events)
    assert _deltas(events).count("toolcall_start") == 1
    (call,) = message.content
    assert isinstance(call, ToolCall) and call.builtin == "shell_call"
    assert call.id == "call_sh1" and call.arguments["commands"] == ["ls -a"]
    assert call.raw == SHELL and message.stop_reason == "tool_use"


def test_a_client_tool_search_keeps_the_final_call_id() -> None:
    item = {
        "type": "tool_search_call",
        "id": "tsc_1",
        "call_id": "call_final",
        "execution": "client",
        "status": "completed",
        "arguments": {"queries": ["weather"]},
    }
    added = {**item, "call_id": "call_early", "arguments": {}, "status": "in_progress"}
    events, message = _stream(_sse(*_item_events(item, added), COMPLETED))
    assert_valid_event_stream(events)
    (call,) = message.content
    assert isinstance(call, ToolCall) and call.id == "call_final"
    assert call.arguments == {"queries": ["weather"]}


COMPUTER = {
    "type": "computer_call",
    "id": "cu_1",
    "call_id": "call_cu1",
    "status": "completed",
    "action": {"type": "click", "button": "left", "x": 100, "y": 200},
    "pending_safety_checks": [
        {"id": "sc_1", "code": "malicious_instructions", "message": "Check the page."}
    ],
}


def test_a_computer_call_is_a_call_the_harness_runs() -> None:
    events, message = _stream(_sse(*_item_events(COMPUTER), COMPLETED))
    assert_valid_event_stream(events)
    (call,) = message.content
    assert isinstance(call, ToolCall) and call.builtin == "computer_call"
    assert call.id == "call_cu1" and call.arguments == COMPUTER["action"]
    assert call.raw == COMPUTER and message.stop_reason == "tool_use"

    # The harness clicks, takes a screenshot and acknowledges the safety check.
    result = ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[ImageContent(data=PNG, mime_type="image/png")],
        details={"acknowledged_safety_checks": COMPUTER["pending_safety_checks"]},
    )
    context = Context(messages=[UserMessage(content="click it"), message, result])
    items = _payload(context)["input"]
    assert items[1] == COMPUTER
    assert items[2] == {
        "type": "computer_call_output",
        "call_id": "call_cu1",
        "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{PNG}"},
        "acknowledged_safety_checks": COMPUTER["pending_safety_checks"],
    }


def test_a_computer_result_without_a_screenshot_raises() -> None:
    events, message = _stream(_sse(*_item_events(COMPUTER), COMPLETED))
    call = message.content[0]
    assert isinstance(call, ToolCall)
    result = ToolResultMessage(
        tool_call_id=call.id, tool_name=call.name, content=[TextContent(text="clicked")]
    )
    context = Context(messages=[UserMessage(content="click it"), message, result])

    async def main() -> None:
        async with __import__("stream_core").stream(contract_model(API), context, options()):
            pass

    try:
        anyio.run(main)
    except ValueError as e:
        assert "computer call" in str(e) and "screenshot" in str(e)
    else:
        raise AssertionError("a computer result without a screenshot was sent")
