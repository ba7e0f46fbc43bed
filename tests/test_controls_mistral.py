"""Portable request controls and structured output on `mistral-conversations`: the exact
request fields sent, the errors raised at `stream()`, and structured answers read back from
a replayed stream."""

from __future__ import annotations

import json
from typing import Any

import pytest
import respx
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import Context, Model, Tool, UserMessage
from stream_core.contract_tests.kit import options, sse_response
from stream_core.provider import get_provider

pytestmark = [pytest.mark.anyio]

API = "mistral-conversations"
API_KEY = "mistral-controls-test-0123456789"
MISTRAL = Model(
    id="mistral-small-latest", api=API, provider="mistral", base_url="https://api.mistral.ai"
)
URL = "https://api.mistral.ai/v1/chat/completions"
WEATHER = Tool(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
    body = {
        "id": "0f3b8c1d2e4a4b6c8d0e1f2a3b4c5d6e",
        "object": "chat.completion.chunk",
        "created": 1769088854,
        "model": "mistral-small-latest",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **more,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


USAGE = {"prompt_tokens": 30, "total_tokens": 42, "completion_tokens": 12}


def text_body(*parts: str, finish: str = "stop") -> bytes:
    out = _chunk({"role": "assistant", "content": ""})
    for part in parts[:-1]:
        out += _chunk({"content": part})
    out += _chunk({"content": parts[-1]}, finish, usage=USAGE)
    return out + b"data: [DONE]\n\n"


def tool_body(name: str, arguments: str) -> bytes:
    """Mistral sends a call whole, in one delta, with no `index`."""
    call = {"id": "D681PevKs", "function": {"name": name, "arguments": arguments}}
    out = _chunk({"role": "assistant", "content": ""})
    out += _chunk({"content": None, "tool_calls": [call]}, "tool_calls", usage=USAGE)
    return out + b"data: [DONE]\n\n"


OK = text_body("ok")


def context(*, tools: bool = True) -> Context:
    return Context(
        system_prompt="Be brief.",
        messages=[UserMessage(content="Weather in Paris?")],
        tools=[WEATHER] if tools else None,
    )


async def call(
    model: Model = MISTRAL, ctx: Context | None = None, body: bytes = OK, **opts: Any
) -> tuple[dict[str, Any], stream_core.AssistantMessage]:
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(URL).mock(return_value=sse_response([body]))
        message = await stream_core.stream(
            model, ctx if ctx is not None else context(), options(api_key=API_KEY, **opts)
        ).result()
    assert route.call_count == 1
    return json.loads(route.calls[0].request.content), message


async def sent(ctx: Context | None = None, **opts: Any) -> dict[str, Any]:
    payload, message = await call(ctx=ctx, **opts)
    if opts.get("output_schema") is None:
        assert message.error is None, message.error
    return payload


# --- tool_choice and parallel_tool_calls ----------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "any"),
        ({"tool": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice(choice: Any, wire: Any) -> None:
    payload = await sent(tool_choice=choice)
    assert payload["tool_choice"] == wire


async def test_tool_choice_without_tools_is_not_sent() -> None:
    payload = await sent(ctx=context(tools=False), tool_choice="none")
    assert "tool_choice" not in payload and "tools" not in payload


@pytest.mark.parametrize("value", [False, True])
async def test_parallel_tool_calls(value: bool) -> None:
    payload = await sent(parallel_tool_calls=value)
    assert payload["parallel_tool_calls"] is value


async def test_parallel_tool_calls_without_tools_is_not_sent() -> None:
    payload = await sent(ctx=context(tools=False), parallel_tool_calls=False)
    assert "parallel_tool_calls" not in payload


async def test_no_controls_no_fields() -> None:
    payload = await sent()
    for name in ("tool_choice", "parallel_tool_calls", "stop", "top_p", "random_seed"):
        assert name not in payload
    assert "presence_penalty" not in payload and "response_format" not in payload


# --- sampling controls --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("control", "value", "field"),
    [
        ("stop", ["\n\n", "END"], "stop"),
        ("top_p", 0.9, "top_p"),
        ("seed", 42, "random_seed"),
        ("presence_penalty", 0.5, "presence_penalty"),
        ("frequency_penalty", -0.25, "frequency_penalty"),
    ],
)
async def test_sampling_control(control: str, value: Any, field: str) -> None:
    payload = await sent(**{control: value})
    assert payload[field] == value
    if control == "seed":
        assert "seed" not in payload


# --- what raises --------------------------------------------------------------------------


async def test_top_k_is_sent() -> None:
    # Issue 27: the official SDK's ChatCompletionRequest declares top_k.
    assert (await sent(top_k=40))["top_k"] == 40


def test_controls_and_extra_declared() -> None:
    wire = get_provider(API).wire
    assert wire is not None
    assert set(wire.controls) == set(stream_core.provider.CONTROLS)
    assert dict(wire.extra) == {}


@pytest.mark.parametrize("key", ["tool_choice", "safe_prompt"])
def test_unknown_extra_key_raises_at_stream(key: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown key '{key}' for mistral-conversations"):
        stream_core.stream(MISTRAL, context(), options(api_key=API_KEY, extra={key: True}))


# --- structured output ----------------------------------------------------------------------


async def test_native_response_format() -> None:
    payload = await sent(output_schema=SCHEMA)
    assert payload["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_answer", "schema": SCHEMA, "strict": True},
    }
    assert [t["function"]["name"] for t in payload["tools"]] == ["get_weather"]


async def test_native_response_format_from_a_class() -> None:
    payload = await sent(output_schema=Weather)
    spec = payload["response_format"]["json_schema"]
    assert spec["name"] == "Weather" and spec["description"] == "The weather in one city."
    assert spec["schema"] == Weather.model_json_schema() and spec["strict"] is False


def test_output_mode_is_native() -> None:
    wire = get_provider(API).wire
    assert wire is not None
    assert wire.output_mode(MISTRAL) == "native"


async def test_tool_mode_forces_the_answer_tool() -> None:
    model = MISTRAL.model_copy(update={"structured_output": "tool"})
    payload, _ = await call(model, ctx=context(tools=False), output_schema=SCHEMA)
    assert "response_format" not in payload
    (tool,) = payload["tools"]
    assert tool["function"]["name"] == "final_answer"
    assert tool["function"]["parameters"] == SCHEMA
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}


async def test_tool_mode_with_caller_tools_asks_for_any() -> None:
    model = MISTRAL.model_copy(update={"structured_output": "tool"})
    payload, _ = await call(model, output_schema=SCHEMA)
    assert [t["function"]["name"] for t in payload["tools"]] == ["get_weather", "final_answer"]
    assert payload["tool_choice"] == "any"


SPLIT_ANSWER = text_body('{"city": "Pa', 'ris", "temp_c"', ": 18.5}")


async def test_native_answer_is_parsed() -> None:
    _, message = await call(body=SPLIT_ANSWER, output_schema=SCHEMA)
    assert message.stop_reason == "stop" and message.error is None
    assert message.output == ANSWER and message.output_mode == "native"


async def test_native_answer_as_a_class_instance() -> None:
    _, message = await call(body=SPLIT_ANSWER, output_schema=Weather)
    assert isinstance(message.output, Weather)
    assert message.output == Weather(city="Paris", temp_c=18.5)


async def test_cut_answer_has_no_output() -> None:
    _, message = await call(body=text_body('{"city": "Pa', finish="length"), output_schema=SCHEMA)
    assert message.stop_reason == "length" and message.output is None
    assert message.text() == '{"city": "Pa'


async def test_invalid_json_answer_is_an_error_with_the_text_kept() -> None:
    _, message = await call(body=text_body("It is 18.5 in Paris."), output_schema=SCHEMA)
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "invalid_output"
    assert message.text() == "It is 18.5 in Paris." and message.output is None


async def test_tool_mode_answer_becomes_text_and_output() -> None:
    model = MISTRAL.model_copy(update={"structured_output": "tool"})
    body = tool_body("final_answer", json.dumps(ANSWER))
    _, message = await call(model, ctx=context(tools=False), body=body, output_schema=SCHEMA)
    assert message.stop_reason == "stop", message.error
    assert [b.type for b in message.content] == ["text"]
    assert message.output == ANSWER and message.output_mode == "tool"
