"""Issue 15's shared machinery, from the user's side: option checks at the call, the
structured answer read once at the end (native or by a forced tool), and tool-argument
checks that hand back a ready error result."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel

import stream_core
from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    Context,
    Model,
    StreamOptions,
    Tool,
    ToolCall,
    UserMessage,
    check_tool_call,
    check_tool_calls,
)
from stream_core._output import make_output_spec
from stream_core.provider import CONTROLS, Assembler, StopRule, get_provider, output_spec

STOPS: Mapping[str, StopRule] = {"end": "stop", "tool": "tool_use", "max": "length"}
MODEL = Model(id="m", api="test-api", provider="test", base_url="https://test.invalid")
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}


class Weather(BaseModel):
    """The weather in one city."""

    city: str
    temp_c: float


def assembler(schema: Any, mode: Any) -> tuple[Assembler, AssistantMessage]:
    message = AssistantMessage(api="test-api", provider="test", model="m")
    out: deque[AssistantStreamEvent] = deque()
    spec = make_output_spec(schema, mode)
    return Assembler(message, MODEL, STOPS, out, output=spec), message


# --- reading the answer -------------------------------------------------------------------


def test_a_native_answer_is_parsed_once_at_the_end() -> None:
    asm, message = assembler(SCHEMA, "native")
    asm.text(0, '{"city": "Par')
    asm.text(0, 'is", "temp_c": 18.5}')
    asm.set_stop_reason("end")
    asm.finalize()
    assert message.output == {"city": "Paris", "temp_c": 18.5}
    assert message.output_mode == "native" and message.stop_reason == "stop"


def test_a_class_gives_an_instance_and_the_history_keeps_json() -> None:
    asm, message = assembler(Weather, "native")
    asm.text(0, '{"city": "Paris", "temp_c": 18.5}')
    asm.finalize()
    assert message.output == Weather(city="Paris", temp_c=18.5)
    dumped = json.loads(message.model_dump_json())
    assert dumped["output"] == {"city": "Paris", "temp_c": 18.5}
    assert AssistantMessage.model_validate(dumped).output == {"city": "Paris", "temp_c": 18.5}


def test_a_length_stop_is_length_never_a_partial_object() -> None:
    asm, message = assembler(SCHEMA, "native")
    asm.text(0, '{"city": "Paris", "te')
    asm.set_stop_reason("max")
    asm.finalize()
    assert message.stop_reason == "length" and message.output is None and message.error is None
    assert message.text() == '{"city": "Paris", "te'


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json at all", "not valid JSON"),
        ("", "no JSON answer"),
        ('{"city": "Paris"}', "does not match Weather"),
    ],
)
def test_a_bad_answer_is_invalid_output_with_the_text_kept(text: str, words: str) -> None:
    asm, message = assembler(Weather, "native")
    asm.text(0, text)
    asm.finalize()
    assert message.stop_reason == "error" and message.output is None
    assert message.error is not None and message.error.kind == "invalid_output"
    assert words in message.error.message
    assert message.text() == text


def test_tool_mode_streams_the_forced_call_as_text_and_stops_normally() -> None:
    asm, message = assembler(SCHEMA, "tool")
    asm.start_tool_call(1, id="toolu_1", name="final_answer")
    asm.tool_call(1, '{"city": "Paris",')
    asm.tool_call(1, ' "temp_c": 18.5}')
    asm.end(1)
    asm.set_stop_reason("tool")  # the vendor says it stopped for a tool
    asm.finalize()
    assert message.tool_calls() == []
    assert message.text() == '{"city": "Paris", "temp_c": 18.5}'
    assert message.stop_reason == "stop" and message.output_mode == "tool"
    assert message.output == {"city": "Paris", "temp_c": 18.5}


def test_tool_mode_keeps_the_callers_own_tool_calls() -> None:
    asm, message = assembler(SCHEMA, "tool")
    asm.tool_call(0, '{"q": 1}', id="c1", name="search")  # first delta names the tool
    asm.tool_call(1, '{"city": "Paris", "temp_c": 1}', id="c2", name="final_answer")
    asm.set_stop_reason("tool")
    asm.finalize()
    assert [c.name for c in message.tool_calls()] == ["search"]
    assert message.stop_reason == "tool_use" and message.output is None


def test_a_non_object_schema_is_wrapped_for_the_tool_and_unwrapped_when_read() -> None:
    spec = make_output_spec({"type": "array", "items": {"type": "string"}}, "tool")
    assert spec.tool().parameters["properties"]["answer"] == spec.schema
    asm, message = assembler(spec.schema, "tool")
    asm.tool_call(0, '{"answer": ["a", "b"]}', id="c", name="final_answer")
    asm.finalize()
    assert message.output == ["a", "b"]


def test_the_schema_name_comes_from_its_title_or_class() -> None:
    assert make_output_spec(Weather, "native").name == "Weather"
    assert make_output_spec({**SCHEMA, "title": "My weather!"}, "native").name == "My_weather"
    assert make_output_spec(SCHEMA, "native").name == "final_answer"
    assert make_output_spec(SCHEMA, "native").strict
    assert not make_output_spec({"type": "object", "properties": {"a": {}}}, "native").strict


# --- checks at the call -------------------------------------------------------------------

APIS = sorted(e.api for e in stream_core.list_providers() if e.wire is not None)


def model_for(api: str, **overrides: Any) -> Model:
    return Model(id="model-x", api=api, provider="p", base_url="https://x.test", **overrides)


def context(tools: bool = True) -> Context:
    tool = Tool(name="get_weather", parameters=SCHEMA)
    return Context(messages=[UserMessage(content="hi")], tools=[tool] if tools else None)


@pytest.mark.parametrize("api", APIS)
def test_an_unknown_extra_key_raises_at_the_call_naming_the_api(api: str) -> None:
    with pytest.raises(ValueError, match=rf"StreamOptions\.extra: unknown key 'top_pp' for {api}"):
        stream_core.stream(model_for(api), context(), StreamOptions(extra={"top_pp": 0.5}))


@pytest.mark.parametrize("api", APIS)
def test_a_portable_control_in_extra_points_at_its_field(api: str) -> None:
    with pytest.raises(ValueError, match=r"it is StreamOptions\.tool_choice"):
        stream_core.stream(model_for(api), context(), StreamOptions(extra={"tool_choice": "auto"}))


@pytest.mark.parametrize("api", APIS)
def test_every_control_an_api_lacks_raises_at_the_call(api: str) -> None:
    wire = get_provider(api).wire
    assert wire is not None
    values: dict[str, Any] = {
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "stop": ["END"],
        "top_p": 0.5,
        "top_k": 5,
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.1,
        "output_schema": SCHEMA,
    }
    assert set(values) == set(CONTROLS)
    for name in CONTROLS:
        if name in wire.controls:
            continue
        with pytest.raises(ValueError, match=rf"StreamOptions\.{name}: {api} has no such control"):
            stream_core.stream(model_for(api), context(), StreamOptions(**{name: values[name]}))


@pytest.mark.parametrize("api", APIS)
def test_a_named_tool_choice_must_name_a_tool(api: str) -> None:
    wire = get_provider(api).wire
    assert wire is not None
    if "tool_choice" not in wire.controls or not wire.takes_tools:
        pytest.skip(f"{api} takes no tool_choice naming a tool")
    with pytest.raises(ValueError, match=r"StreamOptions\.tool_choice: no tool named 'nope'"):
        stream_core.stream(model_for(api), context(), StreamOptions(tool_choice={"tool": "nope"}))


def test_on_payload_with_the_wrong_arity_raises_naming_its_signature() -> None:
    with pytest.raises(TypeError, match=r"on_payload\(payload, model\)"):
        StreamOptions(on_payload=lambda payload: payload)  # type: ignore[arg-type,misc]
    options = StreamOptions()
    options.on_payload = lambda: None  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"StreamOptions\.on_payload: must take two arguments"):
        stream_core.stream(model_for("anthropic-messages"), context(), options)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("tool_choice", "any", ValueError),
        ("tool_choice", {"name": "x"}, ValueError),
        ("stop", "END", TypeError),
        ("stop", [""], ValueError),
        ("top_p", 1.5, ValueError),
        ("top_k", 0, ValueError),
        ("seed", 1.5, TypeError),
        ("presence_penalty", float("nan"), ValueError),
        ("parallel_tool_calls", "yes", TypeError),
        ("output_schema", "json", TypeError),
        ("output_schema", {"default": float("inf")}, ValueError),
    ],
)
def test_bad_control_values_raise_naming_the_field(field: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=rf"StreamOptions\.{field}:"):
        StreamOptions(**{field: value})


# --- the tool-mode request ----------------------------------------------------------------


def _sent(model: Model, ctx: Context, options: StreamOptions) -> dict[str, Any]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"message": "x"}})

    async def main() -> None:
        client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        options.client = client
        options.api_key = "sk-test-0123456789"
        options.max_retries = 0
        await stream_core.stream(model, ctx, options).result()
        await client.aclose()

    anyio.run(main)
    return json.loads(seen[0].content)


def test_tool_mode_adds_one_forced_tool_and_leaves_the_callers_context_alone() -> None:
    model = model_for("openai-completions", structured_output="tool")
    ctx = context(tools=False)
    body = _sent(model, ctx, StreamOptions(output_schema=Weather))
    assert [t["function"]["name"] for t in body["tools"]] == ["Weather"]
    assert body["tools"][0]["function"]["parameters"]["required"] == ["city", "temp_c"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "Weather"}}
    assert "response_format" not in body
    assert ctx.tools is None


def test_tool_mode_with_the_callers_tools_requires_a_call_of_any() -> None:
    model = model_for("openai-completions", structured_output="tool")
    body = _sent(model, context(), StreamOptions(output_schema=Weather))
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "Weather"]
    assert body["tool_choice"] == "required"


def test_output_spec_follows_the_apis_mode() -> None:
    wire = get_provider("openai-completions").wire
    assert wire is not None
    native = output_spec(wire, model_for("openai-completions"), StreamOptions(output_schema=SCHEMA))
    assert native is not None and native.mode == "native"
    assert output_spec(wire, model_for("openai-completions"), StreamOptions()) is None


# --- tool arguments against their schema --------------------------------------------------

WEATHER_TOOL = Tool(name="get_weather", parameters=SCHEMA)


def call(arguments: dict[str, Any], name: str = "get_weather", **kw: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments, **kw)


def test_a_valid_call_may_run() -> None:
    assert check_tool_call(call({"city": "Paris", "temp_c": 3}), [WEATHER_TOOL]) is None


def test_a_bad_call_gets_a_ready_error_result_with_the_validators_words() -> None:
    result = check_tool_call(call({"city": 3}), [WEATHER_TOOL])
    assert result is not None and result.is_error
    assert result.tool_call_id == "c1" and result.tool_name == "get_weather"
    text = result.content[0].text  # type: ignore[union-attr]
    assert "arguments.city: 3 is not of type 'string'" in text
    assert "'temp_c' is a required property" in text
    assert "NOT executed" in text


def test_an_unknown_tool_and_a_truncated_call_are_refused() -> None:
    unknown = check_tool_call(call({}, name="get_time"), [WEATHER_TOOL])
    assert unknown is not None and "no tool named `get_time`" in unknown.content[0].text  # type: ignore[union-attr]
    cut = check_tool_call(call({}, truncated=True), [WEATHER_TOOL])
    assert cut is not None and "cut off by the output limit" in cut.content[0].text  # type: ignore[union-attr]


def test_check_tool_calls_returns_the_errors_in_call_order() -> None:
    message = AssistantMessage(
        api="a",
        provider="p",
        model="m",
        stop_reason="tool_use",
        content=[
            ToolCall(id="a", name="get_weather", arguments={"city": 1, "temp_c": 1}),
            ToolCall(id="b", name="get_weather", arguments={"city": "x", "temp_c": 1}),
            ToolCall(id="c", name="nope", arguments={}),
        ],
    )
    assert [r.tool_call_id for r in check_tool_calls(message, [WEATHER_TOOL])] == ["a", "c"]
    message.stop_reason = "length"
    assert [r.tool_call_id for r in check_tool_calls(message, [WEATHER_TOOL])] == ["a", "b", "c"]


def test_a_class_schema_is_built_once_and_each_call_gets_its_own_copy() -> None:
    from stream_core._output import make_output_spec

    class Point(BaseModel):
        x: int

    first = make_output_spec(Point, "native")
    first.schema["properties"]["x"]["type"] = "edited by a payload hook"
    second = make_output_spec(Point, "native")
    assert second.schema == Point.model_json_schema()
