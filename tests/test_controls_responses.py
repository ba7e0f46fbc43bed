"""openai-responses: the portable request controls (exact Responses fields), the `extra`
knobs, structured output (native `text.format` json_schema and the forced-tool fallback),
and how a structured answer is read back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import AssistantMessage, Context, Model, Tool, UserMessage
from stream_core.contract_tests.kit import options
from stream_core.providers import openai_responses

API = "openai-responses"
MODEL = Model(id="gpt-test", api=API, provider="openai", base_url="https://api.openai.com/v1")
AZURE = Model(
    id="gpt-test",
    api=API,
    provider="azure-openai",
    base_url="https://res.openai.azure.com/openai/v1",
)
WEATHER = Tool(
    name="weather",
    description="Weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ASK = Context(messages=[UserMessage(content="Weather in Paris?")])
WITH_TOOLS = Context(messages=[UserMessage(content="Weather in Paris?")], tools=[WEATHER])
ANSWER_TEXT = json.dumps(ANSWER, separators=(",", ":"))


# --- a stream, and what was sent --------------------------------------------------------


def _ev(kind: str, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, **fields}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


USAGE = {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}


def _text_body(text: str, *, status: str = "completed") -> bytes:
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed" if status == "completed" else "incomplete",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    response: dict[str, Any] = {"id": "resp_1", "object": "response", "status": status}
    response["usage"] = USAGE
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return b"".join(
        [
            _ev("response.created", response={"id": "resp_1", "status": "in_progress"}),
            _ev(
                "response.output_item.added",
                output_index=0,
                item={**item, "content": [], "status": "in_progress"},
            ),
            _ev("response.output_text.delta", item_id="msg_1", output_index=0, delta=text[:7]),
            _ev("response.output_text.delta", item_id="msg_1", output_index=0, delta=text[7:]),
            _ev("response.output_item.done", output_index=0, item=item),
            _ev(
                "response.completed" if status == "completed" else "response.incomplete",
                response=response,
            ),
        ]
    )


def _call_body(name: str, arguments: str) -> bytes:
    item = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": name,
        "status": "completed",
        "arguments": arguments,
    }
    return b"".join(
        [
            _ev("response.created", response={"id": "resp_2", "status": "in_progress"}),
            _ev(
                "response.output_item.added",
                output_index=0,
                item={**item, "arguments": "", "status": "in_progress"},
            ),
            _ev(
                "response.function_call_arguments.delta",
                item_id="fc_1",
                output_index=0,
                delta=arguments[:9],
            ),
            _ev(
                "response.function_call_arguments.delta",
                item_id="fc_1",
                output_index=0,
                delta=arguments[9:],
            ),
            _ev("response.output_item.done", output_index=0, item=item),
            _ev(
                "response.completed",
                response={"id": "resp_2", "status": "completed", "usage": USAGE},
            ),
        ]
    )


def _call(
    context: Context = ASK,
    *,
    model: Model = MODEL,
    body: bytes | None = None,
    **opts: Any,
) -> tuple[dict[str, Any], AssistantMessage, httpx.Request]:
    """Stream one message through `stream_core.stream`, the vendor replaced by `body`."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=body if body is not None else _text_body("Sunny."),
        )

    async def main() -> AssistantMessage:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            async with stream_core.stream(model, context, options(client=client, **opts)) as s:
                async for _ in s:
                    pass
                return await s.result()

    message = anyio.run(main)
    return json.loads(sent[0].content), message, sent[0]


def _payload(context: Context = ASK, **opts: Any) -> dict[str, Any]:
    return _call(context, **opts)[0]


# --- tool_choice, parallel_tool_calls --------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"tool": "weather"}, {"type": "function", "name": "weather"}),
    ],
)
def test_tool_choice_values(choice: Any, sent: Any) -> None:
    payload = _payload(WITH_TOOLS, tool_choice=choice)
    assert payload["tool_choice"] == sent
    assert [t["name"] for t in payload["tools"]] == ["weather"]


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_tool_choice_without_tools_sends_nothing(choice: str) -> None:
    payload = _payload(ASK, tool_choice=choice)
    assert "tool_choice" not in payload and "tools" not in payload


def test_tool_choice_defaults_to_nothing() -> None:
    assert "tool_choice" not in _payload(WITH_TOOLS)


@pytest.mark.parametrize("value", [False, True])
def test_parallel_tool_calls(value: bool) -> None:
    assert _payload(WITH_TOOLS, parallel_tool_calls=value)["parallel_tool_calls"] is value


def test_parallel_tool_calls_only_with_tools() -> None:
    assert "parallel_tool_calls" not in _payload(ASK, parallel_tool_calls=False)
    assert "parallel_tool_calls" not in _payload(WITH_TOOLS)


def test_named_tool_missing_raises_at_stream() -> None:
    with pytest.raises(ValueError, match=r"StreamOptions\.tool_choice: no tool named 'nope'"):
        stream_core.stream(MODEL, WITH_TOOLS, options(tool_choice={"tool": "nope"}))


def test_required_without_tools_raises_at_stream() -> None:
    with pytest.raises(ValueError, match=r"StreamOptions\.tool_choice: 'required'"):
        stream_core.stream(MODEL, ASK, options(tool_choice="required"))


# --- sampling ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.0, 0.25, 1])
def test_top_p(value: float) -> None:
    assert _payload(top_p=value)["top_p"] == value


def test_top_p_absent_by_default() -> None:
    assert "top_p" not in _payload()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stop", ["\n\n"]),
        ("seed", 7),
        ("top_k", 40),
        ("presence_penalty", 0.5),
        ("frequency_penalty", 0.5),
    ],
)
def test_controls_the_api_lacks_raise_at_stream(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"StreamOptions\.{field}: openai-responses has no"):
        stream_core.stream(MODEL, ASK, options(**{field: value}))


def test_controls_table() -> None:
    wire = openai_responses.WIRE
    assert set(wire.controls) == {"tool_choice", "parallel_tool_calls", "top_p", "output_schema"}
    assert wire.output_mode(MODEL) == "native"
    assert wire.output_mode(AZURE) == "native"


# --- extra ------------------------------------------------------------------------------


def test_unknown_extra_key_raises_at_stream() -> None:
    with pytest.raises(ValueError, match=r"StreamOptions\.extra: unknown key 'verbose'.*"):
        stream_core.stream(MODEL, ASK, options(extra={"verbose": True}))


def test_old_extra_tool_choice_points_at_the_control() -> None:
    with pytest.raises(ValueError, match=r"it is StreamOptions\.tool_choice"):
        stream_core.stream(MODEL, WITH_TOOLS, options(extra={"tool_choice": "auto"}))


def test_extra_keys_are_read() -> None:
    payload = _payload(
        extra={"service_tier": "flex", "store": True, "reasoning_summary": "concise"},
        model=MODEL.model_copy(update={"reasoning": True}),
        reasoning="low",
    )
    assert payload["service_tier"] == "flex"
    assert payload["store"] is True
    assert payload["reasoning"] == {"effort": "low", "summary": "concise"}


def test_azure_extra_keys_are_read() -> None:
    _, _, request = _call(
        model=AZURE.model_copy(update={"base_url": "https://res.openai.azure.com/openai"}),
        extra={"deployment": "my-deploy", "api_version": "2025-01-01"},
    )
    assert json.loads(request.content)["model"] == "my-deploy"
    assert request.url.params["api-version"] == "2025-01-01"


def test_extra_table_lists_every_key_the_module_reads() -> None:
    source = Path(openai_responses.__file__).read_text()
    read = set(re.findall(r'extra(?:\.get\(|\[)"(\w+)"', source))
    read |= set(re.findall(r'"(\w+)" in extra', source))
    assert read == set(openai_responses.WIRE.extra)


# --- structured output: the request --------------------------------------------------------


def test_native_output_schema_request() -> None:
    payload = _payload(output_schema=SCHEMA)
    assert payload["text"] == {
        "format": {"type": "json_schema", "name": "final_answer", "schema": SCHEMA, "strict": True}
    }
    assert "tools" not in payload and "tool_choice" not in payload


def test_native_output_schema_not_strict_and_titled() -> None:
    loose = {"title": "Report card", "type": "object", "properties": {"x": {"type": "number"}}}
    fmt = _payload(output_schema=loose)["text"]["format"]
    assert fmt == {"type": "json_schema", "name": "Report_card", "schema": loose, "strict": False}


def test_native_output_schema_from_a_class_carries_its_description() -> None:
    fmt = _payload(output_schema=Weather)["text"]["format"]
    assert fmt["name"] == "Weather"
    assert fmt["description"] == "The weather in one city."
    assert fmt["schema"] == Weather.model_json_schema()
    assert fmt["strict"] is False  # pydantic leaves additionalProperties open


def test_native_output_schema_keeps_the_caller_tools() -> None:
    payload = _payload(WITH_TOOLS, output_schema=SCHEMA, tool_choice="auto")
    assert payload["text"]["format"]["type"] == "json_schema"
    assert [t["name"] for t in payload["tools"]] == ["weather"]
    assert payload["tool_choice"] == "auto"


def test_tool_mode_request_forces_the_output_tool() -> None:
    model = MODEL.model_copy(update={"structured_output": "tool"})
    payload, message, _ = _call(
        model=model, output_schema=SCHEMA, body=_call_body("final_answer", ANSWER_TEXT)
    )
    assert "text" not in payload
    assert payload["tools"] == [
        {
            "type": "function",
            "name": "final_answer",
            "description": "Give the final answer in this shape.",
            "parameters": SCHEMA,
            "strict": False,
        }
    ]
    assert payload["tool_choice"] == {"type": "function", "name": "final_answer"}
    assert message.output == ANSWER and message.output_mode == "tool"


def test_tool_mode_with_caller_tools_requires_a_call() -> None:
    model = MODEL.model_copy(update={"structured_output": "tool"})
    payload = _payload(WITH_TOOLS, model=model, output_schema=SCHEMA)
    assert [t["name"] for t in payload["tools"]] == ["weather", "final_answer"]
    assert payload["tool_choice"] == "required"


# --- structured output: the answer --------------------------------------------------------


def test_native_answer_is_parsed() -> None:
    _, message, _ = _call(output_schema=SCHEMA, body=_text_body(ANSWER_TEXT))
    assert message.stop_reason == "stop"
    assert message.output == ANSWER and message.output_mode == "native"
    assert message.text() == ANSWER_TEXT


def test_native_answer_with_a_class_gives_an_instance() -> None:
    _, message, _ = _call(output_schema=Weather, body=_text_body(ANSWER_TEXT))
    assert isinstance(message.output, Weather)
    assert message.output == Weather(city="Paris", temp_c=18.5)


def test_cut_answer_gives_no_output() -> None:
    body = _text_body('{"city":"Pa', status="incomplete")
    _, message, _ = _call(output_schema=SCHEMA, body=body)
    assert message.stop_reason == "length"
    assert message.output is None


def test_invalid_json_answer_is_an_error_with_the_text_kept() -> None:
    _, message, _ = _call(output_schema=SCHEMA, body=_text_body("It is sunny in Paris."))
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "invalid_output"
    assert message.text() == "It is sunny in Paris."


def test_tool_mode_answer_is_one_text_block() -> None:
    model = MODEL.model_copy(update={"structured_output": "tool"})
    _, message, _ = _call(
        model=model, output_schema=Weather, body=_call_body("Weather", ANSWER_TEXT)
    )
    assert message.stop_reason == "stop"
    assert [b.type for b in message.content] == ["text"]
    assert message.text() == ANSWER_TEXT
    assert message.output == Weather(city="Paris", temp_c=18.5)
