"""Anthropic thinking across a tool loop (issue 6, section 4).

With thinking on, Anthropic rejects a request whose open tool loop's last assistant turn
does not start with a thinking block ("a final assistant message must start with a
thinking block"). Such a loop (after a handoff, a model switch, or a turn made without
thinking) is continued without thinking, as the vendor documents.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import options, sse_response

MODEL = Model(
    id="claude-thinker",
    api="anthropic-messages",
    provider="anthropic",
    base_url="https://api.anthropic.com",
    reasoning=True,
    max_tokens=32_000,
)
SAME: dict[str, Any] = {"api": MODEL.api, "provider": MODEL.provider, "model": MODEL.id}
OTHER: dict[str, Any] = {"api": "openai-completions", "provider": "openai", "model": "gpt-x"}
OK_BODY = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":"ok"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _payload(messages: list[Any], **opts: Any) -> dict[str, Any]:
    async def main() -> httpx.Request:
        with respx.mock(assert_all_mocked=True) as mock:
            route = mock.post("https://api.anthropic.com/v1/messages").mock(
                return_value=sse_response([OK_BODY])
            )
            message = await stream_core.complete(
                MODEL, Context(messages=messages), options(reasoning="medium", **opts)
            )
            assert message.error is None, message.error
            return route.calls[0].request

    return json.loads(anyio.run(main).content)


def _call_turn(who: dict[str, Any], *leading: Any, call_id: str = "toolu_1") -> AssistantMessage:
    return AssistantMessage(
        **who,
        content=[*leading, ToolCall(id=call_id, name="read", arguments={"p": "x"})],
        stop_reason="tool_use",
    )


def _result(call_id: str = "toolu_1") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="read", content=[TextContent(text="contents")]
    )


SIGNED = ThinkingContent(thinking="Read the file first.", signature="sig-1")


def test_a_loop_whose_last_call_turn_starts_with_signed_thinking_keeps_thinking() -> None:
    payload = _payload([UserMessage(content="go"), _call_turn(SAME, SIGNED), _result()])
    assert payload["thinking"]["type"] == "enabled"
    assert payload["messages"][1]["content"][0]["type"] == "thinking"


def test_redacted_thinking_counts_as_a_leading_thinking_block() -> None:
    redacted = ThinkingContent(signature="opaque", redacted=True)
    payload = _payload([UserMessage(content="go"), _call_turn(SAME, redacted), _result()])
    assert payload["thinking"]["type"] == "enabled"


@pytest.mark.parametrize(
    "turn",
    [
        _call_turn(SAME),  # made without thinking (reasoning switched on mid-loop)
        _call_turn(SAME, TextContent(text="Reading.")),
        _call_turn(OTHER, ThinkingContent(thinking="Other vendor's reasoning.", signature="x")),
        _call_turn(SAME, ThinkingContent(thinking="Unsigned, so sent as text.")),
    ],
    ids=["no-thinking", "text-first", "handoff", "unsigned"],
)
def test_a_loop_without_leading_thinking_is_sent_without_thinking(turn: AssistantMessage) -> None:
    """If this fails: Anthropic answers 400 "a final assistant message must start with a
    thinking block" after a handoff or a model switch mid-loop."""
    payload = _payload([UserMessage(content="go"), turn, _result()], temperature=0.3)
    assert "thinking" not in payload
    assert "interleaved-thinking" not in json.dumps(payload)
    # Without thinking the usual knobs are allowed again.
    assert payload["temperature"] == 0.3


def test_the_rule_reads_the_last_call_turn_of_the_loop() -> None:
    messages = [
        UserMessage(content="go"),
        _call_turn(SAME, SIGNED, call_id="toolu_1"),
        _result("toolu_1"),
        _call_turn(OTHER, call_id="toolu_2"),  # a model switch mid-loop
        _result("toolu_2"),
    ]
    assert "thinking" not in _payload(messages)
    # The other way round the last call turn is signed: thinking stays on.
    messages[1], messages[3] = (
        _call_turn(OTHER, call_id="toolu_1"),
        _call_turn(SAME, SIGNED, call_id="toolu_2"),
    )
    assert _payload(messages)["thinking"]["type"] == "enabled"


def test_a_new_user_message_closes_the_loop_and_thinking_is_back() -> None:
    messages = [
        UserMessage(content="go"),
        _call_turn(OTHER),
        _result(),
        AssistantMessage(**OTHER, content=[TextContent(text="Done.")]),
        UserMessage(content="Now something else."),
    ]
    assert _payload(messages)["thinking"]["type"] == "enabled"


def test_a_fresh_conversation_has_thinking() -> None:
    assert _payload([UserMessage(content="hi")])["thinking"]["type"] == "enabled"
