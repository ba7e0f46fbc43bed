"""Anthropic stream shapes the recordings do not show, and request knobs."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from stream_core import ThinkingContent, ToolCall
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import Run, options, run_provider, sse_response

API = "anthropic-messages"


def _ev(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _start(usage: dict[str, Any] | None = None) -> bytes:
    usage = usage or {"input_tokens": 10, "output_tokens": 1}
    return _ev("message_start", message={"id": "msg_1", "usage": usage})


def _end(stop: str | None, usage: dict[str, Any] | None = None) -> bytes:
    return _ev("message_delta", delta={"stop_reason": stop}, usage=usage or {}) + _ev(
        "message_stop"
    )


def _run(*events: bytes, **opts: Any) -> Run:
    async def main() -> Run:
        return await run_provider(API, [sse_response([b"".join(events)])], opts=options(**opts))

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


def test_redacted_thinking_is_kept_with_its_payload() -> None:
    run = _run(
        _start(),
        _ev(
            "content_block_start",
            index=0,
            content_block={"type": "redacted_thinking", "data": "QUJD"},
        ),
        _ev("content_block_stop", index=0),
        _end("end_turn"),
    )
    (block,) = run.message.content
    assert isinstance(block, ThinkingContent)
    assert block.redacted and block.signature == "QUJD" and block.thinking == ""


def test_tool_input_given_at_block_start_is_used() -> None:
    """Non-streaming proxies send the whole input in content_block_start and no deltas."""
    start = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, 2]}}
    run = _run(
        _start(),
        _ev("content_block_start", index=0, content_block=start),
        _ev("content_block_stop", index=0),
        _end("tool_use"),
    )
    (call,) = run.message.content
    assert isinstance(call, ToolCall) and call.arguments == {"a": [1, 2]}
    assert run.message.stop_reason == "tool_use"


def test_server_tool_blocks_are_kept_with_their_deltas() -> None:
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    run = _run(
        _start(),
        _ev("content_block_start", index=0, content_block=server),
        _ev(
            "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "{}"}
        ),
        _ev("content_block_stop", index=0),
        _ev("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        _ev("content_block_delta", index=1, delta={"type": "citations_delta", "citation": {}}),
        _ev("content_block_delta", index=1, delta={"type": "text_delta", "text": "found"}),
        _ev("content_block_stop", index=1),
        _end("end_turn"),
    )
    assert [b.type for b in run.message.content] == ["server_tool_call", "text"]
    call = run.message.content[0]
    assert call.id == "srvtoolu_1" and call.kind == "web_search"  # type: ignore[union-attr]
    assert run.message.text() == "found"


def test_nulled_usage_fields_keep_message_start_values() -> None:
    run = _run(
        _start({"input_tokens": 40, "cache_read_input_tokens": 7, "output_tokens": 1}),
        _end(
            "end_turn", {"input_tokens": None, "cache_read_input_tokens": None, "output_tokens": 9}
        ),
    )
    usage = run.message.usage
    assert (usage.input, usage.cache_read, usage.output, usage.total_tokens) == (40, 7, 9, 56)


@pytest.mark.parametrize(
    ("raw", "stop"),
    [("model_context_window_exceeded", "length"), ("pause_turn", "stop"), ("brand_new", "stop")],
)
def test_stop_values(raw: str, stop: str) -> None:
    run = _run(_start(), _end(raw))
    assert run.message.stop_reason == stop and run.message.raw_stop_reason == raw


def test_request_knobs_reach_the_payload() -> None:
    sent: list[dict[str, Any]] = []

    def hook(payload: dict[str, Any], model: Any) -> None:
        sent.append(payload)

    _run(
        _start(),
        _end("end_turn"),
        on_payload=hook,
        metadata={"user_id": "u-42"},
        reasoning="high",
        max_tokens=4000,
    )
    (payload,) = sent
    assert payload["metadata"] == {"user_id": "u-42"}
    # The high budget (16384) does not fit under 4000: it shrinks, and output keeps room.
    budget = payload["thinking"]["budget_tokens"]
    assert payload["max_tokens"] > budget >= 1024
