"""Portable request controls and structured output on `openai-completions` (Chat Completions
and the servers that copy it): the exact request fields sent, the errors raised at
`stream()`, and structured answers read back from a replayed stream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import Context, Model, Tool, UserMessage
from stream_core.contract_tests.kit import options, sse_response
from stream_core.provider import get_provider

pytestmark = [pytest.mark.anyio]

API = "openai-completions"
API_KEY = "sk-controls-test-0123456789"
GPT = Model(id="gpt-4.1", api=API, provider="openai", base_url="https://api.openai.com/v1")
VLLM = Model(id="qwen3", api=API, provider="vllm", base_url="http://localhost:8000/v1")
DEEPSEEK = Model(
    id="deepseek-chat", api=API, provider="deepseek", base_url="https://api.deepseek.com"
)
WEATHER = Tool(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-controls",
        "object": "chat.completion.chunk",
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def text_body(*parts: str, finish: str = "stop") -> bytes:
    out = _chunk({"role": "assistant", "content": ""})
    for part in parts:
        out += _chunk({"content": part})
    out += _chunk({}, finish)
    usage = {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}
    tail = {"id": "chatcmpl-controls", "choices": [], "usage": usage}
    return out + b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n"


def tool_body(name: str, *fragments: str) -> bytes:
    out = _chunk({"role": "assistant", "content": None})
    first = {"index": 0, "id": "call_out_1", "type": "function"}
    out += _chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]})
    for fragment in fragments:
        out += _chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})
    out += _chunk({}, "tool_calls")
    return out + b"data: [DONE]\n\n"


OK = text_body("ok")


def context(*, tools: bool = True, system: str | None = "Be brief.") -> Context:
    return Context(
        system_prompt=system,
        messages=[UserMessage(content="Weather in Paris?")],
        tools=[WEATHER] if tools else None,
    )


async def call(
    model: Model = GPT, ctx: Context | None = None, body: bytes = OK, **opts: Any
) -> tuple[dict[str, Any], stream_core.AssistantMessage]:
    """One call through `stream_core.stream` against a mocked server: the JSON sent and the
    final message."""
    url = model.base_url.rstrip("/") + "/chat/completions"
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(url).mock(return_value=sse_response([body]))
        message = await stream_core.stream(
            model, ctx if ctx is not None else context(), options(api_key=API_KEY, **opts)
        ).result()
    assert route.call_count == 1
    return json.loads(route.calls[0].request.content), message


async def sent(model: Model = GPT, ctx: Context | None = None, **opts: Any) -> dict[str, Any]:
    payload, message = await call(model, ctx, **opts)
    if opts.get("output_schema") is None:
        assert message.error is None, message.error
    return payload


# --- tool_choice and parallel_tool_calls ----------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"tool": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice(choice: Any, wire: Any) -> None:
    payload = await sent(tool_choice=choice)
    assert payload["tool_choice"] == wire


@pytest.mark.parametrize("choice", ["auto", "none"])
async def test_tool_choice_without_tools_is_not_sent(choice: str) -> None:
    payload = await sent(ctx=context(tools=False), tool_choice=choice)
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
    for name in ("tool_choice", "parallel_tool_calls", "stop", "top_p", "top_k", "seed"):
        assert name not in payload
    assert "presence_penalty" not in payload and "response_format" not in payload


# --- sampling controls --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("control", "value", "field"),
    [
        ("stop", ["\n\n", "END"], "stop"),
        ("top_p", 0.9, "top_p"),
        ("seed", 42, "seed"),
        ("presence_penalty", 0.5, "presence_penalty"),
        ("frequency_penalty", -0.25, "frequency_penalty"),
    ],
)
async def test_sampling_control(control: str, value: Any, field: str) -> None:
    payload = await sent(**{control: value})
    assert payload[field] == value


async def test_top_k_on_a_server_that_takes_it() -> None:
    payload = await sent(VLLM, top_k=40)
    assert payload["top_k"] == 40


async def test_top_k_by_model_compat() -> None:
    model = GPT.model_copy(update={"provider": "my-gateway", "compat": {"top_k": True}})
    payload = await sent(model, top_k=5)
    assert payload["top_k"] == 5


@pytest.mark.parametrize("provider", ["openai", "groq", "deepseek"])
def test_top_k_on_a_server_without_it_raises_at_stream(provider: str) -> None:
    model = GPT.model_copy(update={"provider": provider})
    with pytest.raises(ValueError, match=r"^StreamOptions\.top_k: openai-completions") as err:
        stream_core.stream(model, context(), options(api_key=API_KEY, top_k=40))
    assert "compat" in str(err.value) and "top_k" in str(err.value)


@pytest.mark.parametrize("rows", [("vllm", "together", "openrouter", "llama.cpp")])
def test_top_k_rows(rows: tuple[str, ...]) -> None:
    from stream_core.providers import openai_completions as chat

    assert all(chat.COMPAT[r].top_k for r in rows)
    assert not any(row.top_k for name, row in chat.COMPAT.items() if name not in rows)


# --- what raises --------------------------------------------------------------------------


def test_every_portable_control_is_mapped() -> None:
    wire = get_provider(API).wire
    assert wire is not None
    assert set(wire.controls) == set(stream_core.provider.CONTROLS)
    assert dict(wire.extra) == {}


@pytest.mark.parametrize("key", ["tool_choice", "response_format", "top_k"])
def test_unknown_extra_key_raises_at_stream(key: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown key '{key}' for openai-completions"):
        stream_core.stream(GPT, context(), options(api_key=API_KEY, extra={key: "auto"}))


def test_required_without_tools_raises_at_stream() -> None:
    with pytest.raises(ValueError, match="StreamOptions.tool_choice"):
        stream_core.stream(GPT, context(tools=False), options(tool_choice="required"))


# --- structured output: requests ------------------------------------------------------------


async def test_native_response_format() -> None:
    payload = await sent(output_schema=SCHEMA)
    assert payload["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_answer", "schema": SCHEMA, "strict": True},
    }
    assert [t["function"]["name"] for t in payload["tools"]] == ["get_weather"]
    assert "tool_choice" not in payload


async def test_native_response_format_from_a_class_has_its_name_and_description() -> None:
    payload = await sent(output_schema=Weather)
    spec = payload["response_format"]["json_schema"]
    assert spec["name"] == "Weather"
    assert spec["description"] == "The weather in one city."
    assert spec["schema"] == Weather.model_json_schema()
    assert spec["strict"] is False  # pydantic leaves additionalProperties open


async def test_json_object_mode_puts_the_schema_in_the_system_prompt() -> None:
    payload = await sent(DEEPSEEK, output_schema=SCHEMA)
    assert payload["response_format"] == {"type": "json_object"}
    system = payload["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.\n\n")
    assert "JSON" in system["content"]
    assert json.dumps(SCHEMA, separators=(",", ":")) in system["content"]


async def test_json_object_mode_without_a_system_prompt() -> None:
    payload = await sent(DEEPSEEK, ctx=context(system=None), output_schema=SCHEMA)
    assert payload["messages"][0]["role"] == "system"
    assert payload["messages"][0]["content"].startswith("Answer with one JSON value")


async def test_tool_mode_forces_the_answer_tool() -> None:
    model = GPT.model_copy(update={"id": "gpt-3.5-turbo"})
    payload = await sent(model, ctx=context(tools=False), output_schema=SCHEMA)
    assert "response_format" not in payload
    (tool,) = payload["tools"]
    assert tool["function"]["name"] == "final_answer"
    assert tool["function"]["parameters"] == SCHEMA
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}


async def test_tool_mode_with_caller_tools_requires_a_call() -> None:
    model = GPT.model_copy(update={"compat": {"response_format": "none"}})
    payload = await sent(model, output_schema=SCHEMA, parallel_tool_calls=False)
    assert [t["function"]["name"] for t in payload["tools"]] == ["get_weather", "final_answer"]
    assert payload["tool_choice"] == "required"
    assert payload["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("model_id", "provider", "compat", "mode"),
    [
        ("gpt-4o", "openai", {}, "native"),
        ("gpt-4.1-mini", "openai", {}, "native"),
        ("o3", "openai", {}, "native"),
        ("gpt-4o-mini", "azure-openai", {}, "native"),
        ("gpt-3.5-turbo", "openai", {}, "tool"),
        ("gpt-3.5-turbo-0125", "openai", {}, "tool"),
        ("gpt-4", "openai", {}, "tool"),
        ("gpt-4-0613", "openai", {}, "tool"),
        ("gpt-4-turbo", "openai", {}, "tool"),
        ("gpt-4-turbo-2024-04-09", "openai", {}, "tool"),
        ("openai/gpt-3.5-turbo", "openrouter", {}, "tool"),
        ("deepseek-chat", "deepseek", {}, "json_object"),
        ("llama3.2", "ollama", {"response_format": "json_object"}, "json_object"),
        ("llama3.2", "ollama", {"response_format": "none"}, "tool"),
        ("qwen3", "vllm", {}, "native"),
    ],
)
def test_output_mode(model_id: str, provider: str, compat: dict[str, Any], mode: str) -> None:
    wire = get_provider(API).wire
    assert wire is not None
    model = Model(id=model_id, api=API, provider=provider, base_url="http://x", compat=compat)
    assert wire.output_mode(model) == mode


# --- structured output: answers -------------------------------------------------------------

SPLIT_ANSWER = text_body('{"city": "Pa', 'ris", "temp_c"', ": 18.5}")


async def test_native_answer_is_parsed() -> None:
    payload, message = await call(body=SPLIT_ANSWER, output_schema=SCHEMA)
    assert "response_format" in payload
    assert message.stop_reason == "stop" and message.error is None
    assert message.output == ANSWER
    assert message.output_mode == "native"


async def test_native_answer_as_a_class_instance() -> None:
    _, message = await call(body=SPLIT_ANSWER, output_schema=Weather)
    assert message.output == Weather(city="Paris", temp_c=18.5)
    assert isinstance(message.output, Weather)


async def test_json_object_answer_is_parsed() -> None:
    _, message = await call(DEEPSEEK, body=SPLIT_ANSWER, output_schema=SCHEMA)
    assert message.output == ANSWER and message.output_mode == "json_object"


async def test_cut_answer_has_no_output() -> None:
    _, message = await call(body=text_body('{"city": "Pa', finish="length"), output_schema=SCHEMA)
    assert message.stop_reason == "length"
    assert message.output is None
    assert message.text() == '{"city": "Pa'


async def test_invalid_json_answer_is_an_error_with_the_text_kept() -> None:
    _, message = await call(body=text_body("Paris, 18.5 degrees"), output_schema=SCHEMA)
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "invalid_output"
    assert message.text() == "Paris, 18.5 degrees"
    assert message.output is None


async def test_tool_mode_answer_becomes_text_and_output() -> None:
    model = GPT.model_copy(update={"structured_output": "tool"})
    body = tool_body("final_answer", '{"city": "Paris",', ' "temp_c": 18.5}')
    payload, message = await call(model, ctx=context(tools=False), body=body, output_schema=SCHEMA)
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    assert message.stop_reason == "stop", message.error
    assert [b.type for b in message.content] == ["text"]
    assert json.loads(message.text()) == ANSWER
    assert message.output == ANSWER and message.output_mode == "tool"


def test_request_is_only_built_by_stream() -> None:
    """The builder's error reaches the caller before any I/O (no mock: a request would fail)."""
    transport = httpx.MockTransport(lambda request: pytest.fail("no request expected"))
    client = httpx.AsyncClient(transport=transport)
    with pytest.raises(ValueError, match="top_k"):
        stream_core.stream(GPT, context(), options(api_key=API_KEY, top_k=3, client=client))
