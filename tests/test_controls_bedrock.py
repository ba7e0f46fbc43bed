"""Bedrock ConverseStream: the portable request controls and structured output, as sent.

Each control lands on the Converse field AWS documents (`toolConfig.toolChoice`,
`inferenceConfig.stopSequences` / `topP`, `outputConfig.textFormat`); the controls Converse
lacks, and the values it cannot express, raise at `stream()` before any I/O.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import BASE_URL, Run, event_stream_frame, options, run_provider

API = "bedrock-converse-stream"
LOOKUP = Tool(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


def model(
    model_id: str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0", **overrides: Any
) -> Model:
    fields: dict[str, Any] = {
        "id": model_id,
        "api": API,
        "provider": "amazon-bedrock",
        "base_url": BASE_URL,
        "reasoning": True,
        "max_tokens": 32_000,
    }
    fields.update(overrides)
    return Model(**fields)


CLAUDE_45 = model()
NOVA = model("amazon.nova-pro-v1:0", reasoning=False)  # no structured outputs
OLD_CLAUDE = model("anthropic.claude-3-7-sonnet-20250219-v1:0")  # thinks, no structured outputs


def ctx(*, tools: bool = True, history: bool = False) -> Context:
    messages: list[Any] = [UserMessage(content="Weather in Paris?")]
    if history:
        turn = {"api": API, "provider": "amazon-bedrock", "model": CLAUDE_45.id}
        messages += [
            AssistantMessage(
                **turn,
                content=[ToolCall(id="tooluse_1", name="lookup", arguments={"word": "Paris"})],
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id="tooluse_1", tool_name="lookup", content=[TextContent(text="a city")]
            ),
        ]
    return Context(messages=messages, tools=[LOOKUP] if tools else None)


def frame(event: str, payload: dict[str, Any]) -> bytes:
    return event_stream_frame(event, json.dumps(payload).encode())


def answer_body(*fragments: str, stop: str = "end_turn") -> bytes:
    return b"".join(
        [
            frame("messageStart", {"role": "assistant"}),
            *(
                frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": f}})
                for f in fragments
            ),
            frame("contentBlockStop", {"contentBlockIndex": 0}),
            frame("messageStop", {"stopReason": stop}),
            frame("metadata", {"usage": {"inputTokens": 9, "outputTokens": 5, "totalTokens": 14}}),
        ]
    )


OK_BODY = answer_body("ok")


def call(
    m: Model = CLAUDE_45, context: Context | None = None, body: bytes = OK_BODY, **opts: Any
) -> Run:
    response = httpx.Response(
        200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=body
    )

    async def main() -> Run:
        return await run_provider(
            API, [response], context=context or ctx(), opts=options(**opts), model=m
        )

    return anyio.run(main)


def sent(m: Model = CLAUDE_45, context: Context | None = None, **opts: Any) -> dict[str, Any]:
    run = call(m, context, **opts)
    if "output_schema" not in opts:  # "ok" is no structured answer: only the request counts
        assert run.message.error is None, run.message.error
    (request,) = run.requests
    return dict(json.loads(request.content))


def refused(m: Model = CLAUDE_45, context: Context | None = None, **opts: Any) -> str:
    """The ValueError `stream()` itself raises (no request is made)."""
    with pytest.raises(ValueError) as info:
        stream_core.stream(m, context or ctx(), options(**opts))
    return str(info.value)


# --- tool_choice ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"auto": {}}),
        ("required", {"any": {}}),
        ({"tool": "lookup"}, {"tool": {"name": "lookup"}}),
    ],
)
def test_tool_choice_values(choice: Any, wire: dict[str, Any]) -> None:
    config = sent(tool_choice=choice)["toolConfig"]
    assert config["toolChoice"] == wire
    assert [t["toolSpec"]["name"] for t in config["tools"]] == ["lookup"]


def test_no_tool_choice_sends_no_tool_choice() -> None:
    assert "toolChoice" not in sent()["toolConfig"]


def test_none_leaves_the_tools_out() -> None:
    assert "toolConfig" not in sent(tool_choice="none")


def test_none_with_tool_blocks_in_the_history_raises_at_stream() -> None:
    message = refused(context=ctx(history=True), tool_choice="none")
    assert message.startswith("StreamOptions.tool_choice:")
    assert API in message and "toolConfig" in message


def test_auto_with_tool_blocks_in_the_history_is_sent() -> None:
    config = sent(context=ctx(history=True), tool_choice="auto")["toolConfig"]
    assert config["toolChoice"] == {"auto": {}}


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_tool_choice_without_tools_sends_nothing(choice: str) -> None:
    assert "toolConfig" not in sent(context=ctx(tools=False), tool_choice=choice)


@pytest.mark.parametrize("choice", ["required", {"tool": "lookup"}])
def test_a_forced_tool_with_claude_thinking_raises_at_stream(choice: Any) -> None:
    message = refused(tool_choice=choice, reasoning="high")
    assert message.startswith("StreamOptions.tool_choice:")
    assert API in message and "thinking" in message


def test_a_forced_tool_on_a_model_without_thinking_config_is_sent() -> None:
    payload = sent(NOVA, tool_choice="required")
    assert payload["toolConfig"]["toolChoice"] == {"any": {}}
    assert "additionalModelRequestFields" not in payload


def test_parallel_tool_calls_false_raises_at_stream() -> None:
    message = refused(parallel_tool_calls=False)
    assert message.startswith("StreamOptions.parallel_tool_calls:") and API in message


def test_parallel_tool_calls_true_is_the_default_and_sends_nothing() -> None:
    assert sent(parallel_tool_calls=True)["toolConfig"].keys() == {"tools"}


# --- inferenceConfig ------------------------------------------------------------------------


def test_stop_and_top_p() -> None:
    inference = sent(stop=["END", "\n\n"], top_p=0.8)["inferenceConfig"]
    assert inference == {"maxTokens": 32_000, "stopSequences": ["END", "\n\n"], "topP": 0.8}
    assert sent(temperature=0.3)["inferenceConfig"]["temperature"] == 0.3


def test_claude_4_5_refuses_temperature_and_top_p_together() -> None:
    # Issue 27: Sonnet 4.5 answers 400 to both; the call raises, naming the model.
    message = refused(top_p=0.8, temperature=0.3)
    assert "does not take temperature and top_p together" in message
    assert "claude-sonnet-4-5" in message


def test_controls_left_unset_send_nothing() -> None:
    payload = sent()
    assert payload["inferenceConfig"] == {"maxTokens": 32_000}
    assert "outputConfig" not in payload


def test_top_p_with_claude_thinking_must_be_at_least_095() -> None:
    message = refused(top_p=0.5, reasoning="low")
    assert message.startswith("StreamOptions.top_p:") and API in message
    assert sent(top_p=0.96, reasoning="low")["inferenceConfig"]["topP"] == 0.96


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_k", 40), ("seed", 7), ("presence_penalty", 0.5), ("frequency_penalty", 0.5)],
)
def test_unsupported_controls_raise_at_stream(field: str, value: Any) -> None:
    message = refused(**{field: value})
    assert message.startswith(f"StreamOptions.{field}:") and API in message


# --- extra ----------------------------------------------------------------------------------


def test_region_and_profile_are_declared_extra_keys() -> None:
    wire = stream_core.provider.get_provider(API).wire
    assert wire is not None
    assert set(wire.extra) == {"region", "profile"}
    assert set(wire.controls) == {"tool_choice", "stop", "top_p", "output_schema"}
    sent(extra={"region": "eu-west-1", "profile": "dev"})  # accepted


@pytest.mark.parametrize(
    ("key", "hint"), [("tool_choice", "StreamOptions.tool_choice"), ("regoin", "region")]
)
def test_unknown_extra_keys_raise_at_stream(key: str, hint: str) -> None:
    message = refused(extra={key: "any"})
    assert message.startswith("StreamOptions.extra:") and repr(key) in message
    assert API in message and hint in message


# --- structured output: the request ---------------------------------------------------------


def test_native_output_config_text_format() -> None:
    payload = sent(output_schema=SCHEMA)
    assert payload["outputConfig"] == {
        "textFormat": {
            "type": "json_schema",
            "structure": {"jsonSchema": {"schema": json.dumps(SCHEMA), "name": "final_answer"}},
        }
    }
    assert "toolChoice" not in payload["toolConfig"]
    assert [t["toolSpec"]["name"] for t in payload["toolConfig"]["tools"]] == ["lookup"]


def test_native_schema_is_a_closed_json_string_with_name_and_description() -> None:
    schema = {
        "title": "City weather",
        "description": "Weather by city.",
        "type": "object",
        "properties": {"place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    definition = sent(output_schema=schema)["outputConfig"]["textFormat"]["structure"]["jsonSchema"]
    assert definition["name"] == "City_weather"
    assert definition["description"] == "Weather by city."
    assert isinstance(definition["schema"], str)
    got = json.loads(definition["schema"])
    assert got["additionalProperties"] is False
    assert got["properties"]["place"]["additionalProperties"] is False


def test_native_output_from_a_pydantic_class() -> None:
    definition = sent(output_schema=Weather)["outputConfig"]["textFormat"]["structure"][
        "jsonSchema"
    ]
    assert definition["name"] == "Weather"
    assert definition["description"] == "The weather in one city."
    assert json.loads(definition["schema"]) == {
        **Weather.model_json_schema(),
        "additionalProperties": False,
    }


def test_tool_mode_fallback_forces_the_output_tool() -> None:
    payload = sent(NOVA, context=ctx(tools=False), output_schema=SCHEMA)
    assert payload["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "final_answer",
                    "description": "Give the final answer in this shape.",
                    "inputSchema": {"json": SCHEMA},
                }
            }
        ],
        "toolChoice": {"tool": {"name": "final_answer"}},
    }
    assert "outputConfig" not in payload


def test_tool_mode_fallback_with_the_callers_tools_requires_any_tool() -> None:
    config = sent(NOVA, output_schema=SCHEMA)["toolConfig"]
    assert [t["toolSpec"]["name"] for t in config["tools"]] == ["lookup", "final_answer"]
    assert config["toolChoice"] == {"any": {}}


def test_tool_mode_fallback_with_claude_thinking_raises_at_stream() -> None:
    message = refused(OLD_CLAUDE, output_schema=SCHEMA, reasoning="high")
    assert message.startswith("StreamOptions.tool_choice:") and API in message
    assert "output_schema" in message


@pytest.mark.parametrize(
    ("model_id", "mode"),
    [
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "native"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "native"),
        ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "native"),
        ("anthropic.claude-opus-4-5-20251101-v1:0", "native"),
        ("anthropic.claude-opus-4-6-v1", "native"),
        ("eu.anthropic.claude-sonnet-4-6", "native"),
        ("anthropic.claude-opus-4-1-20250805-v1:0", "tool"),
        ("anthropic.claude-sonnet-4-20250514-v1:0", "tool"),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", "tool"),
        ("amazon.nova-pro-v1:0", "tool"),
        ("meta.llama3-3-70b-instruct-v1:0", "tool"),
    ],
)
def test_output_mode_by_model_id(model_id: str, mode: str) -> None:
    wire = stream_core.provider.get_provider(API).wire
    assert wire is not None
    assert wire.output_mode(model(model_id)) == mode


def test_model_structured_output_native_overrides_the_api() -> None:
    payload = sent(model("qwen.qwen3-32b-v1:0", structured_output="native"), output_schema=SCHEMA)
    assert payload["outputConfig"]["textFormat"]["type"] == "json_schema"


# --- structured output: the answer ----------------------------------------------------------


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
    run = call(body=answer_body("Sunny, 18.5 degrees."), output_schema=SCHEMA)
    assert run.message.stop_reason == "error"
    assert run.message.error is not None and run.message.error.kind == "invalid_output"
    assert run.message.text() == "Sunny, 18.5 degrees." and run.message.output is None


def test_a_tool_mode_answer_becomes_text_and_output() -> None:
    body = b"".join(
        [
            frame("messageStart", {"role": "assistant"}),
            frame(
                "contentBlockStart",
                {
                    "contentBlockIndex": 0,
                    "start": {"toolUse": {"toolUseId": "t1", "name": "Weather"}},
                },
            ),
            frame(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"city": "Paris", '}}},
            ),
            frame(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '"temp_c": 18.5}'}}},
            ),
            frame("contentBlockStop", {"contentBlockIndex": 0}),
            frame("messageStop", {"stopReason": "tool_use"}),
            frame("metadata", {"usage": {"inputTokens": 9, "outputTokens": 5, "totalTokens": 14}}),
        ]
    )
    run = call(NOVA, ctx(tools=False), body=body, output_schema=Weather)
    assert run.message.stop_reason == "stop" and run.message.output_mode == "tool"
    assert run.message.output == Weather(city="Paris", temp_c=18.5)
    assert run.message.text() == '{"city": "Paris", "temp_c": 18.5}'
