"""ollama-chat and ollama-generate: the portable request controls (Ollama's `options`
object, `format`, tool_choice it can and cannot express), no `extra` knobs, and how a
structured answer is read back."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import AssistantMessage, Context, Model, Tool, UserMessage
from stream_core.contract_tests.kit import options
from stream_core.providers import ollama

CHAT = Model(id="llama3.2", api="ollama-chat", provider="ollama", base_url="http://ollama.test")
GENERATE = CHAT.model_copy(update={"api": "ollama-generate"})
BOTH = pytest.mark.parametrize("model", [CHAT, GENERATE], ids=["chat", "generate"])
WEATHER = Tool(
    name="weather",
    description="Weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ASK = Context(messages=[UserMessage(content="Weather in Paris?")])
WITH_TOOLS = Context(messages=[UserMessage(content="Weather in Paris?")], tools=[WEATHER])
ANSWER_TEXT = json.dumps(ANSWER, separators=(",", ":"))


# --- a stream, and what was sent --------------------------------------------------------


def _body(model: Model, text: str, *, done_reason: str = "stop") -> bytes:
    def piece(part: str, done: bool) -> dict[str, Any]:
        line: dict[str, Any] = {"model": "llama3.2", "created_at": "2025-01-01T00:00:00Z"}
        if model.api == "ollama-chat":
            line["message"] = {"role": "assistant", "content": part}
        else:
            line["response"] = part
        line["done"] = done
        if done:
            line.update(done_reason=done_reason, prompt_eval_count=20, eval_count=10)
        return line

    lines = [piece(text[:7], False), piece(text[7:], False), piece("", True)]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def _call(
    model: Model = CHAT, context: Context = ASK, *, body: bytes | None = None, **opts: Any
) -> tuple[dict[str, Any], AssistantMessage]:
    """Stream one message through `stream_core.stream`, Ollama replaced by `body`."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        content = body if body is not None else _body(model, "Sunny.")
        return httpx.Response(
            200, headers={"content-type": "application/x-ndjson"}, content=content
        )

    async def main() -> AssistantMessage:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            async with stream_core.stream(model, context, options(client=client, **opts)) as s:
                async for _ in s:
                    pass
                return await s.result()

    message = anyio.run(main)
    return json.loads(sent[0].content), message


def _payload(model: Model = CHAT, context: Context = ASK, **opts: Any) -> dict[str, Any]:
    payload, message = _call(model, context, **opts)
    assert message.stop_reason == "stop", message.error
    return payload


# --- sampling controls: the `options` object ----------------------------------------------


@BOTH
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stop", ["\n\n", "User:"]),
        ("top_p", 0.9),
        ("top_k", 40),
        ("seed", 42),
        ("seed", 0),
        ("presence_penalty", 0.5),
        ("presence_penalty", -1.0),
        ("frequency_penalty", 1.5),
    ],
)
def test_sampling_controls_go_in_options(model: Model, field: str, value: Any) -> None:
    payload = _payload(model, **{field: value})
    assert payload["options"] == {field: value}
    assert field not in payload  # never top level


@BOTH
def test_controls_keep_the_existing_options(model: Model) -> None:
    payload = _payload(
        model,
        max_tokens=100,
        temperature=0.3,
        stop=["END"],
        top_p=0.8,
        top_k=20,
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.2,
    )
    assert payload["options"] == {
        "num_predict": 100,
        "temperature": 0.3,
        "stop": ["END"],
        "top_p": 0.8,
        "top_k": 20,
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
    }


@BOTH
def test_no_controls_no_options(model: Model) -> None:
    payload = _payload(model)
    assert "options" not in payload and "format" not in payload


def test_stop_list_is_a_copy() -> None:
    stop = ["END"]
    request = ollama.WIRE.build_request(CHAT, ASK, stream_core.StreamOptions(stop=stop))
    request.payload["options"]["stop"].append("x")
    assert stop == ["END"]


# --- tool_choice, parallel_tool_calls -----------------------------------------------------


def test_chat_tool_choice_auto_sends_the_tools_and_no_choice() -> None:
    payload = _payload(CHAT, WITH_TOOLS, tool_choice="auto")
    assert [t["function"]["name"] for t in payload["tools"]] == ["weather"]
    assert "tool_choice" not in payload


def test_chat_tool_choice_none_leaves_the_tools_out() -> None:
    payload = _payload(CHAT, WITH_TOOLS, tool_choice="none")
    assert "tools" not in payload and "tool_choice" not in payload


@BOTH
@pytest.mark.parametrize("choice", ["required", {"tool": "weather"}])
def test_forcing_a_tool_raises_at_stream(model: Model, choice: Any) -> None:
    # /api/generate takes no tools at all (WireAPI.takes_tools): that is said first.
    said = "cannot force a tool" if model.api != "ollama-generate" else "takes no tools"
    with pytest.raises(ValueError, match=rf"{model.api} {said}"):
        stream_core.stream(model, WITH_TOOLS, options(tool_choice=choice))


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_generate_tool_choice_auto_and_none_are_harmless(choice: str) -> None:
    payload = _payload(GENERATE, ASK, tool_choice=choice)
    assert "tools" not in payload and "tool_choice" not in payload


def test_generate_refuses_tools_at_stream() -> None:
    with pytest.raises(ValueError, match=r"^context\.tools: ollama-generate takes no tools"):
        stream_core.stream(GENERATE, WITH_TOOLS, options())


@BOTH
def test_parallel_tool_calls_false_raises_at_stream(model: Model) -> None:
    with pytest.raises(
        ValueError, match=rf"StreamOptions\.parallel_tool_calls: {model.api} has no"
    ):
        stream_core.stream(model, WITH_TOOLS, options(parallel_tool_calls=False))


def test_parallel_tool_calls_true_is_the_default_and_sends_nothing() -> None:
    assert "parallel_tool_calls" not in _payload(CHAT, WITH_TOOLS, parallel_tool_calls=True)


def test_controls_tables() -> None:
    sampling = {"stop", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty"}
    for wire in ollama.WIRES:
        assert set(wire.controls) == {"tool_choice", "output_schema", *sampling}
        assert dict(wire.extra) == {}
        assert wire.output_mode(CHAT) == "native"


# --- extra ------------------------------------------------------------------------------


@BOTH
def test_unknown_extra_key_raises_at_stream(model: Model) -> None:
    with pytest.raises(
        ValueError, match=rf"StreamOptions\.extra: unknown key 'num_ctx' for {model.api}"
    ):
        stream_core.stream(model, ASK, options(extra={"num_ctx": 4096}))


# --- structured output: the request --------------------------------------------------------


@BOTH
def test_output_schema_is_sent_as_format(model: Model) -> None:
    payload = _payload(model, output_schema=SCHEMA, body=_body(model, ANSWER_TEXT))
    assert payload["format"] == SCHEMA


@BOTH
def test_output_schema_class_is_sent_as_its_json_schema(model: Model) -> None:
    payload = _payload(model, output_schema=Weather, body=_body(model, ANSWER_TEXT))
    assert payload["format"] == Weather.model_json_schema()


def test_chat_output_schema_keeps_the_tools() -> None:
    payload = _payload(CHAT, WITH_TOOLS, output_schema=SCHEMA, body=_body(CHAT, ANSWER_TEXT))
    assert payload["format"] == SCHEMA
    assert [t["function"]["name"] for t in payload["tools"]] == ["weather"]


@BOTH
@pytest.mark.parametrize("context", [ASK, WITH_TOOLS], ids=["no-tools", "tools"])
def test_tool_mode_raises_at_stream(model: Model, context: Context) -> None:
    tool_mode = model.model_copy(update={"structured_output": "tool"})
    with pytest.raises(ValueError, match=rf"{model.api} (cannot force a tool|takes no tools)"):
        stream_core.stream(tool_mode, context, options(output_schema=SCHEMA))


# --- structured output: the answer --------------------------------------------------------


@BOTH
def test_native_answer_is_parsed(model: Model) -> None:
    _, message = _call(model, output_schema=SCHEMA, body=_body(model, ANSWER_TEXT))
    assert message.stop_reason == "stop"
    assert message.output == ANSWER and message.output_mode == "native"
    assert message.text() == ANSWER_TEXT


@BOTH
def test_native_answer_with_a_class_gives_an_instance(model: Model) -> None:
    _, message = _call(model, output_schema=Weather, body=_body(model, ANSWER_TEXT))
    assert isinstance(message.output, Weather)
    assert message.output == Weather(city="Paris", temp_c=18.5)


@BOTH
def test_cut_answer_gives_no_output(model: Model) -> None:
    body = _body(model, '{"city":"Pa', done_reason="length")
    _, message = _call(model, output_schema=SCHEMA, body=body)
    assert message.stop_reason == "length"
    assert message.output is None


@BOTH
def test_invalid_json_answer_is_an_error_with_the_text_kept(model: Model) -> None:
    _, message = _call(model, output_schema=SCHEMA, body=_body(model, "It is sunny."))
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "invalid_output"
    assert message.text() == "It is sunny."
