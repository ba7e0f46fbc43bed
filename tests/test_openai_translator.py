"""OpenAI-compatible stream shapes the recordings do not show, each seen in the wild."""

from __future__ import annotations

import json
from typing import Any

import anyio

from stream_core import TextContent, ThinkingContent, ToolCall
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import Run, run_provider, sse_response

API = "openai-completions"


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    body: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", **extra}
    if delta is not None or finish is not None:
        body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _run(*chunks: bytes) -> Run:
    body = b"".join(chunks) + b"data: [DONE]\n\n"

    async def main() -> Run:
        return await run_provider(API, [sse_response([body])])

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


def _call(index: int | None, args: str, id: str | None = None, name: str | None = None) -> dict:
    tc: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        tc["index"] = index
    if id:
        tc["id"] = id
        tc["function"]["name"] = name
    return tc


def test_text_and_tool_call_in_one_delta_are_both_kept() -> None:
    run = _run(
        _chunk({"content": "Reading.", "tool_calls": [_call(0, '{"p":1}', "call_a", "read")]}),
        _chunk(finish="tool_calls"),
    )
    text, call = run.message.content
    assert isinstance(text, TextContent) and text.text == "Reading."
    assert isinstance(call, ToolCall) and call.arguments == {"p": 1}
    assert run.message.stop_reason == "tool_use"


def test_one_index_reused_for_two_calls_does_not_merge() -> None:
    """A bridge that sends every parallel call at index 0 still gives two calls."""
    run = _run(
        _chunk({"tool_calls": [_call(0, '{"a":', "call_1", "one")]}),
        _chunk({"tool_calls": [_call(0, "1}")]}),
        _chunk({"tool_calls": [_call(0, '{"b":2}', "call_2", "two")]}),
        _chunk(finish="tool_calls"),
    )
    calls = run.message.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "one", {"a": 1}),
        ("call_2", "two", {"b": 2}),
    ]


def test_calls_without_index_are_keyed_by_id() -> None:
    """Gemini's OpenAI layer omits `index`; each call comes whole with its id."""
    run = _run(
        _chunk(
            {"tool_calls": [_call(None, '{"x":1}', "g1", "f"), _call(None, '{"y":2}', "g2", "g")]}
        ),
        _chunk(finish="stop"),
    )
    assert [c.arguments for c in run.message.tool_calls()] == [{"x": 1}, {"y": 2}]
    assert run.message.stop_reason == "tool_use"  # complete calls despite the vendor's `stop`


def test_arguments_sent_as_an_object() -> None:
    run = _run(
        _chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "f", "arguments": {"k": "v"}}}
                ]
            }
        ),
        _chunk(finish="tool_calls"),
    )
    assert run.message.tool_calls()[0].arguments == {"k": "v"}


def test_placeholder_null_id_is_not_an_id() -> None:
    run = _run(
        _chunk({"tool_calls": [_call(0, '{"a"', "call_real", "f")]}),
        _chunk({"tool_calls": [{"index": 0, "id": "null", "function": {"arguments": ":1}"}}]}),
        _chunk(finish="tool_calls"),
    )
    (call,) = run.message.tool_calls()
    assert call.id == "call_real" and call.arguments == {"a": 1}


def test_refusal_field_ends_as_refusal_error_with_text_kept() -> None:
    run = _run(_chunk({"refusal": "I can't help with that."}), _chunk(finish="stop"))
    assert run.message.stop_reason == "error"
    assert run.message.error is not None and run.message.error.kind == "refusal"
    assert run.message.raw_stop_reason == "stop"
    assert run.message.text() == "I can't help with that."


def test_typed_content_parts() -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]}
    run = _run(
        _chunk({"content": [thinking]}),
        _chunk({"content": [{"type": "text", "text": "answer"}]}),
        _chunk(finish="stop"),
    )
    first, second = run.message.content
    assert isinstance(first, ThinkingContent) and first.thinking == "hmm"
    assert isinstance(second, TextContent) and second.text == "answer"


def test_concatenated_identical_objects_are_one_call_but_different_ones_are_truncated() -> None:
    same = _run(
        _chunk({"tool_calls": [_call(0, '{"a":1}', "c1", "f")]}),
        _chunk({"tool_calls": [_call(0, '{"a":1}')]}),
        _chunk(finish="tool_calls"),
    )
    assert same.message.tool_calls()[0].arguments == {"a": 1}
    assert not same.message.tool_calls()[0].truncated
    different = _run(
        _chunk({"tool_calls": [_call(0, '{"a":1}', "c1", "f")]}),
        _chunk({"tool_calls": [_call(0, '{"a":2}')]}),
        _chunk(finish="tool_calls"),
    )
    assert different.message.tool_calls()[0].truncated


def test_usage_every_chunk_is_a_snapshot_not_a_sum() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    later = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    run = _run(_chunk({"content": "a"}, usage=usage), _chunk({"content": "b"}, "stop", usage=later))
    assert run.message.usage.input == 10 and run.message.usage.output == 2
    assert run.message.usage.total_tokens == 12
