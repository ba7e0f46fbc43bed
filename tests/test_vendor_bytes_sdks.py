"""The vendors' own SDKs read what `vendor_bytes` writes (issue 28, point 2): the scripted
turn served by `fake_vendor` on loopback, streamed by the official Anthropic, OpenAI
(Chat Completions and Responses) and Ollama clients, parses to the same text, tool calls
and stop reason. The SDKs are in the dev group only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stream_core import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage

SCRIPT = AssistantMessage(
    api="faux", provider="faux", model="m",
    content=[
        ThinkingContent(thinking="Let me look.", signature="sig-1"),
        TextContent(text="Looking both up."),
        ToolCall(id="call_1", name="look", arguments={"q": "one"}),
        ToolCall(id="call_2", name="find", arguments={"q": "two"}),
    ],
    stop_reason="tool_use",
    usage=Usage(input=120, output=40),
)  # fmt: skip
CALLS = [("look", {"q": "one"}), ("find", {"q": "two"})]
ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server(fake_vendor: Any) -> Any:
    return fake_vendor(scenarios={"*": [SCRIPT] * 4})


def test_the_anthropic_sdk_reads_it(server: Any) -> None:
    anthropic = pytest.importorskip("anthropic")
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as client:
        with client.messages.stream(model="m", max_tokens=100, messages=ASK) as stream:
            final = stream.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_use"]
    assert final.content[1].text == "Looking both up."
    assert [(b.name, b.input) for b in final.content[2:]] == CALLS
    assert final.stop_reason == "tool_use" and final.usage.output_tokens == 40


def test_the_openai_sdk_reads_chat_completions(server: Any) -> None:
    openai = pytest.importorskip("openai")
    text, calls, finish = "", {}, None
    with openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0) as client:
        chunks = list(client.chat.completions.create(model="m", messages=ASK, stream=True))
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"name": "", "args": ""})
                entry["name"] += (call.function.name or "") if call.function else ""
                entry["args"] += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish
    assert text == "Looking both up." and finish == "tool_calls"
    assert [(c["name"], json.loads(c["args"])) for c in calls.values()] == CALLS


def test_the_openai_sdk_reads_responses(server: Any) -> None:
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0) as client:
        with client.responses.stream(model="m", input="hi") as stream:
            final = stream.get_final_response()
    assert final.output_text == "Looking both up."
    got = [(o.name, json.loads(o.arguments)) for o in final.output if o.type == "function_call"]
    assert got == CALLS


def test_the_ollama_sdk_reads_it(server: Any) -> None:
    ollama = pytest.importorskip("ollama")
    client = ollama.Client(host=server.url)
    text, calls = "", []
    try:
        parts = list(client.chat(model="m", messages=ASK, stream=True))
    finally:
        client._client.close()
    for part in parts:
        text += part.message.content or ""
        calls += [
            (c.function.name, dict(c.function.arguments)) for c in part.message.tool_calls or []
        ]
    assert text == "Looking both up." and calls == CALLS
