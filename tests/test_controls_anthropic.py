"""Anthropic Messages: the portable request controls and structured output, as sent.

Every control x value lands on Anthropic's documented field; the ones it lacks, and the
pairs it refuses (a forced tool, `top_k`, a low `top_p` with extended thinking), raise at
`stream()`, before any I/O. Structured output is `output_config.format` on the models that
have it (or the beta `output_format`), one forced tool elsewhere; the answer is read back
into `message.output`.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import Context, Model, Tool, UserMessage
from stream_core.contract_tests.kit import BASE_URL, Run, options, run_provider, sse_response

API = "anthropic-messages"
ZOOM = Tool(
    name="zoom",
    description="Zoom in.",
    parameters={"type": "object", "properties": {"factor": {"type": "number"}}},
)


def model(model_id: str = "claude-sonnet-4-5-20250929", **overrides: Any) -> Model:
    fields: dict[str, Any] = {
        "id": model_id,
        "api": API,
        "provider": "anthropic",
        "base_url": BASE_URL,
        "reasoning": True,
        "max_tokens": 32_000,
    }
    fields.update(overrides)
    return Model(**fields)


SONNET_45 = model()
OLD = model("claude-3-5-haiku-20241022", reasoning=False)  # no structured outputs
OLD_THINKING = model("claude-3-7-sonnet-20250219")  # no structured outputs, thinks


def ctx(*, tools: bool = True) -> Context:
    return Context(
        messages=[UserMessage(content="Weather in Paris?")], tools=[ZOOM] if tools else None
    )


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def answer_body(*fragments: str, stop: str = "end_turn") -> bytes:
    return _sse(
        {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 9}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f}}
            for f in fragments
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    )


OK_BODY = answer_body("ok")


def call(
    m: Model = SONNET_45, context: Context | None = None, body: bytes = OK_BODY, **opts: Any
) -> Run:
    async def main() -> Run:
        return await run_provider(
            API, [sse_response([body])], context=context or ctx(), opts=options(**opts), model=m
        )

    return anyio.run(main)


def sent(m: Model = SONNET_45, context: Context | None = None, **opts: Any) -> dict[str, Any]:
    run = call(m, context, **opts)
    if "output_schema" not in opts:  # "ok" is no structured answer: only the request counts
        assert run.message.error is None, run.message.error
    (request,) = run.requests
    return dict(json.loads(request.content))


def request_of(m: Model = SONNET_45, context: Context | None = None, **opts: Any) -> httpx.Request:
    (request,) = call(m, context, **opts).requests
    return request


def refused(m: Model = SONNET_45, context: Context | None = None, **opts: Any) -> str:
    """The ValueError `stream()` itself raises (no request is made)."""
    with pytest.raises(ValueError) as info:
        stream_core.stream(m, context or ctx(), options(**opts))
    return str(info.value)


# --- tool_choice and parallel_tool_calls ------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ({"tool": "zoom"}, {"type": "tool", "name": "zoom"}),
        ("none", {"type": "none"}),
    ],
)
def test_tool_choice_values(choice: Any, wire: dict[str, Any]) -> None:
    assert sent(tool_choice=choice)["tool_choice"] == wire


def test_no_tool_choice_sends_none() -> None:
    assert "tool_choice" not in sent()


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_tool_choice_is_not_sent_without_tools(choice: str) -> None:
    payload = sent(context=ctx(tools=False), tool_choice=choice)
    assert "tool_choice" not in payload and "tools" not in payload


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("auto", {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", {"type": "any", "disable_parallel_tool_use": True}),
        ({"tool": "zoom"}, {"type": "tool", "name": "zoom", "disable_parallel_tool_use": True}),
        ("none", {"type": "none"}),  # no calls at all: nothing to say about parallel ones
    ],
)
def test_parallel_tool_calls_false(choice: Any, wire: dict[str, Any]) -> None:
    assert sent(tool_choice=choice, parallel_tool_calls=False)["tool_choice"] == wire


def test_parallel_tool_calls_true_is_the_default_and_sends_nothing() -> None:
    assert "tool_choice" not in sent(parallel_tool_calls=True)


def test_parallel_tool_calls_false_without_tools_sends_nothing() -> None:
    assert "tool_choice" not in sent(context=ctx(tools=False), parallel_tool_calls=False)


@pytest.mark.parametrize("choice", ["required", {"tool": "zoom"}])
def test_a_forced_tool_with_thinking_raises_at_stream(choice: Any) -> None:
    message = refused(tool_choice=choice, reasoning="high")
    assert message.startswith("StreamOptions.tool_choice:")
    assert API in message and "thinking" in message


def test_auto_with_thinking_is_sent() -> None:
    payload = sent(tool_choice="auto", parallel_tool_calls=False, reasoning="low")
    assert payload["thinking"]["type"] == "enabled"
    assert payload["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_a_forced_tool_is_fine_when_the_model_does_not_think() -> None:
    payload = sent(OLD, tool_choice="required")
    assert "thinking" not in payload and payload["tool_choice"] == {"type": "any"}


def test_reasoning_on_a_model_that_does_not_reason_raises() -> None:
    # Issue 27: a control a model cannot honour raises; it is never dropped silently.
    with pytest.raises(ValueError, match=r"StreamOptions.reasoning: .* does not reason"):
        sent(OLD, reasoning="high")


# --- sampling -----------------------------------------------------------------------------


def test_stop_top_p_top_k() -> None:
    payload = sent(stop=["\n\nHuman:", "END"], top_p=0.9, top_k=40)
    assert payload["stop_sequences"] == ["\n\nHuman:", "END"]
    assert payload["top_p"] == 0.9 and payload["top_k"] == 40


def test_controls_left_unset_send_nothing() -> None:
    payload = sent()
    for key in ("stop_sequences", "top_p", "top_k", "output_config", "output_format"):
        assert key not in payload


def test_top_k_with_thinking_raises_at_stream() -> None:
    message = refused(top_k=5, reasoning="medium")
    assert message.startswith("StreamOptions.top_k:") and API in message


def test_top_p_with_thinking_must_be_at_least_095() -> None:
    message = refused(top_p=0.5, reasoning="medium")
    assert message.startswith("StreamOptions.top_p:") and API in message
    assert sent(top_p=0.97, reasoning="medium")["top_p"] == 0.97


@pytest.mark.parametrize(
    ("field", "value"), [("seed", 7), ("presence_penalty", 0.5), ("frequency_penalty", -0.5)]
)
def test_unsupported_controls_raise_at_stream(field: str, value: Any) -> None:
    message = refused(**{field: value})
    assert message.startswith(f"StreamOptions.{field}:") and API in message


@pytest.mark.parametrize("key", ["tool_choice", "thinking"])
def test_unknown_extra_keys_raise_at_stream(key: str) -> None:
    message = refused(extra={key: "any"})
    assert message.startswith("StreamOptions.extra:") and repr(key) in message and API in message


def test_the_wire_declares_its_controls_and_no_extra() -> None:
    wire = stream_core.provider.get_provider(API).wire
    assert wire is not None
    assert set(wire.controls) == {
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "top_p",
        "top_k",
        "output_schema",
    }
    assert dict(wire.extra) == {}


# --- structured output: the request -------------------------------------------------------


def test_native_output_config_format() -> None:
    request = request_of(output_schema=SCHEMA)
    payload = json.loads(request.content)
    assert payload["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "output_format" not in payload and "tool_choice" not in payload
    assert [t["name"] for t in payload["tools"]] == ["zoom"]  # no forced tool added
    assert "structured-outputs" not in request.headers["anthropic-beta"]


def test_native_schema_objects_are_closed_as_anthropic_requires() -> None:
    schema = {
        "type": "object",
        "properties": {
            "place": {"type": "object", "properties": {"city": {"type": "string"}}},
            "days": {"type": "array", "items": {"$ref": "#/$defs/Day"}},
            "note": {"anyOf": [{"type": "object", "properties": {}}, {"type": "null"}]},
        },
        "$defs": {"Day": {"type": "object", "properties": {"t": {"type": "number"}}}},
    }
    got = sent(output_schema=schema)["output_config"]["format"]["schema"]
    assert got["additionalProperties"] is False
    assert got["properties"]["place"]["additionalProperties"] is False
    assert got["$defs"]["Day"]["additionalProperties"] is False
    assert got["properties"]["note"]["anyOf"][0]["additionalProperties"] is False
    assert got["properties"]["days"] == schema["properties"]["days"]  # type: ignore[index]
    assert "additionalProperties" not in schema  # the caller's schema is not changed


def test_native_output_from_a_pydantic_class() -> None:
    got = sent(output_schema=Weather)["output_config"]["format"]
    assert got["type"] == "json_schema"
    assert got["schema"] == {**Weather.model_json_schema(), "additionalProperties": False}


def test_beta_shape_with_the_compat_flag() -> None:
    beta = model(compat={"structured_output_beta": True})
    request = request_of(beta, output_schema=SCHEMA)
    payload = json.loads(request.content)
    assert payload["output_format"] == {"type": "json_schema", "schema": SCHEMA}
    assert "output_config" not in payload
    assert request.headers["anthropic-beta"] == (
        "fine-grained-tool-streaming-2025-05-14,structured-outputs-2025-11-13"
    )


def test_beta_header_merges_with_the_thinking_beta() -> None:
    beta = model(compat={"structured_output_beta": True})
    request = request_of(beta, output_schema=SCHEMA, reasoning="low")
    assert request.headers["anthropic-beta"].split(",") == [
        "fine-grained-tool-streaming-2025-05-14",
        "interleaved-thinking-2025-05-14",
        "structured-outputs-2025-11-13",
    ]


def test_the_compat_flag_is_type_checked() -> None:
    message = refused(model(compat={"structured_output_beta": "yes"}))
    assert message.startswith("model.compat.structured_output_beta")


def test_native_structured_output_with_thinking_is_sent() -> None:
    payload = sent(output_schema=SCHEMA, reasoning="low")
    assert payload["thinking"]["type"] == "enabled" and "output_config" in payload


def test_tool_mode_fallback_forces_the_output_tool() -> None:
    payload = sent(OLD, context=ctx(tools=False), output_schema=SCHEMA)
    assert payload["tools"] == [
        {
            "name": "final_answer",
            "description": "Give the final answer in this shape.",
            "input_schema": SCHEMA,
        }
    ]
    assert payload["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert "output_config" not in payload and "output_format" not in payload


def test_tool_mode_fallback_with_the_callers_tools_requires_any_tool() -> None:
    payload = sent(OLD, output_schema=SCHEMA)
    assert [t["name"] for t in payload["tools"]] == ["zoom", "final_answer"]
    assert payload["tool_choice"] == {"type": "any"}


def test_tool_mode_fallback_with_thinking_raises_at_stream() -> None:
    message = refused(OLD_THINKING, output_schema=SCHEMA, reasoning="high")
    assert message.startswith("StreamOptions.tool_choice:")
    assert API in message and "thinking" in message and "output_schema" in message


def test_model_structured_output_tool_overrides_the_api() -> None:
    payload = sent(model(structured_output="tool"), context=ctx(tools=False), output_schema=SCHEMA)
    assert payload["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert "output_config" not in payload


@pytest.mark.parametrize(
    ("model_id", "mode"),
    [
        ("claude-opus-4-1-20250805", "native"),
        ("claude-opus-4-1", "native"),
        ("claude-sonnet-4-5-20250929", "native"),
        ("claude-sonnet-4-5", "native"),
        ("claude-haiku-4-5-20251001", "native"),
        ("claude-opus-4-5-20251101", "native"),
        ("claude-opus-4-6", "native"),
        ("claude-sonnet-4-6", "native"),
        ("claude-sonnet-5", "native"),
        ("claude-haiku-4-5@20251001", "native"),
        ("claude-opus-4-20250514", "tool"),
        ("claude-sonnet-4-20250514", "tool"),
        ("claude-3-7-sonnet-20250219", "tool"),
        ("claude-3-5-haiku-latest", "tool"),
        ("claude-3-opus-20240229", "tool"),
        ("some-proxy-model", "tool"),
    ],
)
def test_output_mode_by_model_id(model_id: str, mode: str) -> None:
    wire = stream_core.provider.get_provider(API).wire
    assert wire is not None
    assert wire.output_mode(model(model_id)) == mode


# --- structured output: the answer --------------------------------------------------------


def test_a_native_answer_is_parsed_into_output() -> None:
    run = call(body=answer_body('{"city": "Par', 'is", "temp_c": 18.5}'), output_schema=SCHEMA)
    assert run.message.stop_reason == "stop" and run.message.error is None
    assert run.message.output == ANSWER and run.message.output_mode == "native"


def test_a_pydantic_class_gives_an_instance() -> None:
    run = call(body=answer_body('{"city": "Paris", "temp_c": 18.5}'), output_schema=Weather)
    assert run.message.output == Weather(city="Paris", temp_c=18.5)


def test_a_cut_answer_is_length_without_output() -> None:
    run = call(body=answer_body('{"city": "Par', stop="max_tokens"), output_schema=SCHEMA)
    assert run.message.stop_reason == "length" and run.message.output is None


def test_invalid_json_is_an_invalid_output_error_keeping_the_text() -> None:
    run = call(body=answer_body("It is sunny in Paris."), output_schema=SCHEMA)
    assert run.message.stop_reason == "error"
    assert run.message.error is not None and run.message.error.kind == "invalid_output"
    assert run.message.text() == "It is sunny in Paris." and run.message.output is None


def test_a_tool_mode_answer_becomes_text_and_output() -> None:
    # A class names the forced tool after itself.
    body = _sse(
        {"type": "message_start", "message": {"id": "msg_2", "usage": {"input_tokens": 9}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {
                "type": "input_json_delta",
                "partial_json": '{"city": "Paris", "temp_c": 18.5}',
            },
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    )
    run = call(OLD, ctx(tools=False), body=body, output_schema=Weather)
    assert run.message.stop_reason == "stop" and run.message.output_mode == "tool"
    assert run.message.output == Weather(city="Paris", temp_c=18.5)
    assert run.message.text() == '{"city": "Paris", "temp_c": 18.5}'
