"""`execute_tool_calls`: one result per call, in call order, whatever the handlers do."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from stream_core import (
    AssistantMessage,
    ImageContent,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    audit_tool_pairs,
    execute_tool_calls,
    execute_tool_calls_sync,
)

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOLS = [Tool(name="weather", parameters=SCHEMA), Tool(name="boom"), Tool(name="slow")]


def message(*calls: ToolCall, stop: Any = "tool_use") -> AssistantMessage:
    return AssistantMessage(api="a", provider="p", model="m", stop_reason=stop, content=list(calls))


def text(result: ToolResultMessage) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def weather(call: ToolCall) -> str:
    return f"18C in {call.arguments['city']}"


async def slow(call: ToolCall) -> list[TextContent | ImageContent]:
    await anyio.sleep(0.05)
    return [TextContent(text="slow done")]


def boom(call: ToolCall) -> str:
    raise RuntimeError("disk full")


HANDLERS = {"weather": weather, "boom": boom, "slow": slow}


def test_every_call_gets_exactly_one_result_in_call_order_whatever_happens() -> None:
    msg = message(
        ToolCall(id="1", name="slow", arguments={}),
        ToolCall(id="2", name="weather", arguments={"city": "Paris"}),
        ToolCall(id="3", name="boom", arguments={}),
        ToolCall(id="4", name="nobody", arguments={}),
        ToolCall(id="5", name="weather", arguments={"city": 7}),
        ToolCall(id="6", name="weather", arguments={}, truncated=True),
    )
    results = anyio.run(lambda: execute_tool_calls(msg, HANDLERS, tools=TOOLS))

    assert [r.tool_call_id for r in results] == ["1", "2", "3", "4", "5", "6"]
    assert [r.is_error for r in results] == [False, False, True, True, True, True]
    assert text(results[0]) == "slow done" and text(results[1]) == "18C in Paris"
    assert "RuntimeError: disk full" in text(results[2])
    assert "NOT executed" in text(results[3]) and "NOT executed" in text(results[4])
    assert "7 is not of type 'string'" in text(results[4])
    assert "cut off by the output limit" in text(results[5])
    # The history with these results is one a vendor accepts.
    assert audit_tool_pairs([msg, *results]).ok


def test_a_length_stop_runs_nothing() -> None:
    ran: list[str] = []
    msg = message(ToolCall(id="1", name="weather", arguments={"city": "x"}), stop="length")
    results = execute_tool_calls_sync(msg, {"weather": lambda c: ran.append(c.id) or "ok"})
    assert ran == [] and results[0].is_error


def test_parallel_runs_together_and_in_order_runs_one_by_one() -> None:
    active, peak = 0, 0
    lock = threading.Lock()

    def tracked(call: ToolCall) -> str:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return call.id

    msg = message(*(ToolCall(id=str(i), name="t", arguments={}) for i in range(4)))
    results = execute_tool_calls_sync(msg, {"t": tracked})
    assert [text(r) for r in results] == ["0", "1", "2", "3"] and peak > 1
    peak = 0
    results = execute_tool_calls_sync(msg, {"t": tracked}, parallel=False)
    assert [text(r) for r in results] == ["0", "1", "2", "3"] and peak == 1


def test_a_handlers_own_result_is_paired_to_the_call() -> None:
    def mine(call: ToolCall) -> ToolResultMessage:
        return ToolResultMessage(tool_call_id="wrong", tool_name="x", content=[], details={"k": 1})

    (result,) = execute_tool_calls_sync(
        message(ToolCall(id="c", name="t", arguments={})), {"t": mine}
    )
    assert result.tool_call_id == "c" and result.tool_name == "t" and result.details == {"k": 1}


def test_a_handler_returning_something_else_is_an_error_result() -> None:
    (result,) = execute_tool_calls_sync(
        message(ToolCall(id="c", name="t", arguments={})), {"t": lambda call: 42}
    )
    assert result.is_error and "returned a int" in text(result)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_handlers_under_both_backends(backend: str) -> None:
    msg = message(ToolCall(id="1", name="slow", arguments={}))
    results = anyio.run(lambda: execute_tool_calls(msg, HANDLERS), backend=backend)
    assert text(results[0]) == "slow done"
