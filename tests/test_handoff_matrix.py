"""The handoff matrix: one conversation, as each wire API would have produced it, sent to
every wire API (CONTRACT 3.3; issue: the handoff matrix across all providers).

The conversation holds signed, unsigned and redacted thinking, images in a user turn and in a
tool result, two parallel tool calls with their results, a call that never got a result and
a result that answers no call. Each request is captured with respx and read back into a
neutral transcript by a reader per target API, then checked by the same rules for all:

- every tool call has a non-empty id in the target's id format, unique in the request, and
  exactly one result with that id, after it and before the next user or assistant turn;
- the unpaired call is answered with an error result; the orphan result is not sent;
- roles alternate where the target needs it;
- another model's thinking arrives as text, its signatures and redacted payloads do not;
  the same model's signatures come back verbatim;
- images reach a vision model and become a note for a text-only one.

The modern column (server tools, citations, files, approvals, vendor blocks, built-in
calls: issue 35) is `test_modern_handoff_matrix`, on these sources, readers and capture.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
import stream_core.provider
from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\nhandoff matrix image").decode()
TOOL_IMAGE = base64.b64encode(b"\xff\xd8\xff\xe0 handoff matrix tool image").decode()
SIGNATURE = "c2lnbmVkIHRoaW5raW5nIGZvciB0aGUgbWF0cml4"
REDACTED = "cmVkYWN0ZWQgcGF5bG9hZA=="
HOST = "https://matrix.test"


@dataclass(frozen=True)
class Source:
    """How one wire API's messages look: its model identity and its tool-call ids."""

    provider: str
    model: str
    ids: tuple[str, str, str]
    signed: bool = True
    """Its thinking carries a signature."""


# Ids as each vendor makes them (lengths and alphabets differ on purpose).
SOURCES: dict[str, Source] = {
    "anthropic-messages": Source(
        "anthropic",
        "claude-sonnet-4-5",
        ("toolu_01A09q90qw90lq917835lq9", "toolu_01B", "toolu_01C"),
    ),
    "openai-completions": Source(
        "openai", "gpt-4.1", ("call_abc123", "call_def456", "call_ghi789"), signed=False
    ),
    "openai-responses": Source(
        "openai",
        "gpt-5",
        (
            "call_Ab1|fc_68a0000000000000000000000000000000000000000000000001",
            "call_Cd2|fc_68a0000000000000000000000000000000000000000000000002",
            "call_Ef3|fc_68a0000000000000000000000000000000000000000000000003",
        ),
    ),
    "google-generative-ai": Source("google", "gemini-2.5-pro", ("call_0", "call_1", "call_2")),
    "bedrock-converse-stream": Source(
        "amazon-bedrock",
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        ("tooluse_Q1w2E3r4T5y6U7i8O9p0", "tooluse_A1s2D3", "tooluse_Z1x2C3"),
    ),
    "mistral-conversations": Source(
        "mistral", "magistral-medium-latest", ("gSIMJiOkT", "hTJNKjPlU", "iUKOLkQmV"), signed=False
    ),
    "ollama-chat": Source("ollama", "llama3.2", ("call_0", "call_1", "call_2"), signed=False),
    "ollama-generate": Source("ollama", "llama3.2", ("call_0", "call_1", "call_2"), signed=False),
}


def conversation(api: str) -> list[Message]:
    src = SOURCES[api]
    a, b, c = src.ids

    def said(*content: Any) -> AssistantMessage:
        return AssistantMessage(
            content=list(content), api=api, provider=src.provider, model=src.model
        )

    signature = SIGNATURE if src.signed else None
    first = said(
        ThinkingContent(thinking="The user wants the weather and a photo.", signature=signature),
        ThinkingContent(thinking="", signature=REDACTED, redacted=True),
        TextContent(text="Let me check both."),
        ToolCall(id=a, name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id=b, name="take_photo", arguments={"subject": "Eiffel Tower"}),
        ToolCall(id=c, name="get_weather", arguments={"city": "Lyon"}),
    )
    return [
        UserMessage(
            content=[
                TextContent(text="What is the weather in Paris? Here is my view."),
                ImageContent(data=IMAGE, mime_type="image/png"),
            ]
        ),
        first,
        ToolResultMessage(
            tool_call_id=a, tool_name="get_weather", content=[TextContent(text="18C, cloudy")]
        ),
        ToolResultMessage(
            tool_call_id=b,
            tool_name="take_photo",
            content=[
                TextContent(text="photo taken"),
                ImageContent(data=TOOL_IMAGE, mime_type="image/jpeg"),
            ],
            is_error=False,
        ),
        # c never got a result (the executor crashed), and this one answers nothing.
        ToolResultMessage(
            tool_call_id="ghost_call", tool_name="get_weather", content=[TextContent(text="stale")]
        ),
        UserMessage(content="Thanks. Anything else?"),
        said(
            ThinkingContent(thinking="Nothing more is needed.", signature=None),
            TextContent(text="That is all."),
        ),
        UserMessage(content="Summarize."),
    ]


TOOLS = [
    Tool(
        name="get_weather",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
    Tool(
        name="take_photo",
        parameters={"type": "object", "properties": {"subject": {"type": "string"}}},
    ),
]


# --- a neutral transcript -------------------------------------------------------------------


@dataclass
class Turn:
    role: str  # "user" | "assistant"
    texts: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (id, name)
    results: list[tuple[str, bool]] = field(default_factory=list)  # (id, is_error)
    signatures: list[str] = field(default_factory=list)
    images: int = 0


@dataclass(frozen=True)
class Target:
    read: Callable[[dict[str, Any]], list[Turn]]
    id_pattern: str | None
    """Regex every tool-call id must match; None: the API sends no ids (paired by order)."""
    alternates: bool
    """User and assistant turns must alternate."""
    tools: bool = True
    """The API takes tools (else calls and results arrive as text)."""


def _text_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    out: list[str] = []
    for part in value or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    return out


def _read_anthropic(payload: dict[str, Any]) -> list[Turn]:
    turns = []
    for m in payload["messages"]:
        t = Turn(m["role"])
        content = m["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            kind = block["type"]
            if kind == "text":
                t.texts.append(block["text"])
            elif kind == "image":
                t.images += 1
            elif kind == "thinking":
                t.texts.append(block["thinking"])
                t.signatures.append(block["signature"])
            elif kind == "redacted_thinking":
                t.signatures.append(block["data"])
            elif kind == "tool_use":
                t.calls.append((block["id"], block["name"]))
            elif kind == "tool_result":
                t.results.append((block["tool_use_id"], bool(block.get("is_error"))))
                inner = block["content"]
                t.texts += _text_of(inner)
                t.images += sum(1 for p in inner if isinstance(p, dict) and p["type"] == "image")
        turns.append(t)
    return turns


def _read_chat(payload: dict[str, Any]) -> list[Turn]:
    """OpenAI Chat Completions, Mistral (thinking parts) and Ollama chat (no ids)."""
    turns: list[Turn] = []
    for m in payload["messages"]:
        role = m["role"]
        if role in ("system", "developer"):
            continue
        if role == "tool":
            # Tool results belong to the user side of the exchange.
            t = (
                turns[-1]
                if turns and turns[-1].role == "user" and turns[-1].results
                else Turn("user")
            )
            if t is not (turns[-1] if turns else None):
                turns.append(t)
            call_id = m.get("tool_call_id") or m.get("tool_name") or ""
            texts = _text_of(m.get("content"))
            t.texts += texts
            t.results.append((call_id, any("error" in x.lower() for x in texts)))
            t.images += _chat_images(m)
            continue
        t = Turn("user" if role == "user" else "assistant")
        t.texts += _text_of(m.get("content"))
        for part in m.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "thinking":
                t.texts += _text_of(part.get("thinking"))
        if m.get("thinking"):
            t.texts.append(m["thinking"])
        t.images += _chat_images(m)
        for call in m.get("tool_calls") or []:
            t.calls.append((call.get("id") or call["function"]["name"], call["function"]["name"]))
        turns.append(t)
    return turns


def _chat_images(m: dict[str, Any]) -> int:
    parts = m.get("content") if isinstance(m.get("content"), list) else []
    return len(m.get("images") or []) + sum(
        1 for p in parts if isinstance(p, dict) and p.get("type") in ("image_url", "input_image")
    )


def _read_generate(payload: dict[str, Any]) -> list[Turn]:
    t = Turn("user", texts=[payload["prompt"]], images=len(payload.get("images") or []))
    return [t]


def _read_converse(payload: dict[str, Any]) -> list[Turn]:
    """Bedrock Converse: one key per content block."""
    turns = []
    for m in payload["messages"]:
        t = Turn(m["role"])
        for block in m["content"]:
            if "text" in block:
                t.texts.append(block["text"])
            elif "image" in block:
                t.images += 1
            elif "reasoningContent" in block:
                reasoning = block["reasoningContent"]
                if "redactedContent" in reasoning:
                    t.signatures.append(reasoning["redactedContent"])
                else:
                    t.texts.append(reasoning["reasoningText"]["text"])
                    if reasoning["reasoningText"].get("signature"):
                        t.signatures.append(reasoning["reasoningText"]["signature"])
            elif "toolUse" in block:
                t.calls.append((block["toolUse"]["toolUseId"], block["toolUse"]["name"]))
            elif "toolResult" in block:
                result = block["toolResult"]
                t.results.append((result["toolUseId"], result["status"] == "error"))
                t.texts += _text_of(result["content"])
                t.images += sum(1 for p in result["content"] if "image" in p)
        turns.append(t)
    return turns


def _read_responses(payload: dict[str, Any]) -> list[Turn]:
    """OpenAI Responses: a flat list of input items, grouped here into turns."""
    turns: list[Turn] = []

    def turn(role: str) -> Turn:
        if not turns or turns[-1].role != role:
            turns.append(Turn(role))
        return turns[-1]

    for item in payload["input"]:
        kind = item.get("type", "message")
        if kind == "message" and item["role"] in ("system", "developer"):
            continue
        if kind == "message":
            t = turn("user" if item["role"] == "user" else "assistant")
            content = item["content"]
            t.texts += _text_of(content)
            if isinstance(content, list):
                t.images += sum(1 for p in content if p.get("type") == "input_image")
        elif kind == "reasoning":
            t = turn("assistant")
            t.texts += [p["text"] for p in item.get("summary", []) if "text" in p]
            if item.get("encrypted_content"):
                t.signatures.append(item["encrypted_content"])
        elif kind == "function_call":
            turn("assistant").calls.append((item["call_id"], item["name"]))
        elif kind == "function_call_output":
            t = turn("user")
            output = item["output"]
            texts = _text_of(output)
            t.texts += texts
            if isinstance(output, list):
                t.images += sum(1 for p in output if p.get("type") == "input_image")
            t.results.append((item["call_id"], any("error" in x.lower() for x in texts)))
    return turns


def _read_gemini(payload: dict[str, Any]) -> list[Turn]:
    """Gemini: `contents` of `user`/`model` turns holding parts; calls carry no ids, so
    results pair with calls by order and name."""
    turns = []
    for content in payload["contents"]:
        t = Turn("assistant" if content["role"] == "model" else "user")
        for part in content["parts"]:
            if "text" in part:
                t.texts.append(part["text"])
            if "inlineData" in part:
                t.images += 1
            if "thoughtSignature" in part:
                t.signatures.append(part["thoughtSignature"])
            if "functionCall" in part:
                call = part["functionCall"]
                t.calls.append((call.get("id") or call["name"], call["name"]))
            if "functionResponse" in part:
                response = part["functionResponse"]
                body = response["response"]
                t.texts.append(str(body.get("output") or body.get("error") or ""))
                t.images += len(response.get("parts") or [])
                t.results.append((response.get("id") or response["name"], "error" in body))
        turns.append(t)
    return turns


TARGETS: dict[str, Target] = {
    "anthropic-messages": Target(_read_anthropic, r"[A-Za-z0-9_-]{1,64}", alternates=True),
    "openai-completions": Target(_read_chat, r"[A-Za-z0-9_-]{1,40}", alternates=False),
    "mistral-conversations": Target(_read_chat, r"[A-Za-z0-9]{9}", alternates=False),
    "ollama-chat": Target(_read_chat, None, alternates=False),
    "ollama-generate": Target(_read_generate, None, alternates=False, tools=False),
    "bedrock-converse-stream": Target(_read_converse, r"[A-Za-z0-9_-]{1,64}", alternates=True),
    "openai-responses": Target(_read_responses, r"[A-Za-z0-9_-]{1,64}", alternates=False),
    "google-generative-ai": Target(_read_gemini, None, alternates=True),
}
"""A reader per target API; a new provider adds its row (its payload shape, id rule)."""


# --- sending ------------------------------------------------------------------------------


def _target_model(api: str, *, vision: bool) -> Model:
    src = SOURCES[api]
    return Model(
        id=src.model,
        api=api,
        provider=src.provider,
        base_url=HOST,
        reasoning=True,
        input=["text", "image"] if vision else ["text"],
    )


def _capture(model: Model, messages: list[Message]) -> dict[str, Any]:
    """The JSON body the provider sends (the vendor answers 400, so nothing is retried)."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            400, json={"error": {"type": "invalid_request_error", "message": "x"}}
        )

    async def main() -> None:
        with respx.mock(assert_all_mocked=True) as mock:
            mock.route(host="matrix.test").mock(side_effect=answer)
            # An API without tools (ollama-generate) is handed the history alone.
            wire = stream_core.provider.get_provider(model.api).wire
            takes = wire is None or wire.takes_tools
            context = Context(
                system_prompt="Be brief.", messages=messages, tools=TOOLS if takes else []
            )
            opts = StreamOptions(api_key="matrix-key-0123456789", max_retries=0, reasoning="low")
            await stream_core.stream(model, context, opts).result()

    anyio.run(main)
    assert len(seen) == 1, "the provider sent no request"
    return json.loads(seen[0].content)


def _served() -> set[str]:
    return {e.api for e in stream_core.list_providers()}


PAIRS = [(s, t) for s in SOURCES for t in TARGETS]


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
@pytest.mark.parametrize("vision", [True, False], ids=["vision", "text-only"])
def test_a_conversation_from_any_api_is_a_valid_request_for_any_other(
    source: str, target: str, vision: bool
) -> None:
    if target not in _served():
        pytest.skip(f"{target} is not served")
    rules = TARGETS[target]
    messages = conversation(source)
    payload = _capture(_target_model(target, vision=vision), messages)
    turns = rules.read(payload)
    same = source == target
    everything = "\n".join(x for t in turns for x in t.texts)

    # Another model's reasoning survives as text; a redacted payload only its author can read.
    if not same:
        assert "The user wants the weather and a photo." in everything
    signatures = [s for t in turns for s in t.signatures]
    if same and SOURCES[source].signed:
        assert SIGNATURE in signatures or not signatures, "same-model signature changed"
    else:
        assert SIGNATURE not in signatures and REDACTED not in signatures
        assert REDACTED not in json.dumps(payload)

    # Images: sent to a vision model, a note for a text-only one.
    images = sum(t.images for t in turns)
    if rules.tools and vision:
        assert images >= 2, "the user's image and the tool's image"
    if not vision:
        assert images == 0
        assert IMAGE not in json.dumps(payload) and TOOL_IMAGE not in json.dumps(payload)
        assert "image omitted" in json.dumps(payload).lower()

    if rules.alternates:
        roles = [t.role for t in turns]
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), roles
        assert roles[0] == "user"

    if not rules.tools:
        assert "18C, cloudy" in everything and "stale" not in everything
        return

    calls = [c for t in turns for c in t.calls]
    assert len(calls) == 3, calls
    ids = [c[0] for c in calls]
    if rules.id_pattern is not None:
        assert all(i and re.fullmatch(rules.id_pattern, i) for i in ids), ids
        assert len(set(ids)) == len(ids), f"duplicate ids: {ids}"
    # Every call answered exactly once, by the next user turn, before anything else is said.
    for n, turn in enumerate(turns):
        if not turn.calls:
            continue
        answer = turns[n + 1] if n + 1 < len(turns) else None
        assert answer is not None and answer.role == "user", "results must follow the calls"
        answered = [r[0] for r in answer.results]
        expected = [c[0] for c in turn.calls] if rules.id_pattern else answered
        assert sorted(answered) == sorted(expected) and len(answered) == len(turn.calls)
    unpaired = [t for t in turns for r in t.results if r[0] == ids[2]]
    if rules.id_pattern is not None:
        assert unpaired and any(r == (ids[2], True) for t in unpaired for r in t.results)
    assert "stale" not in everything, "an orphan result was sent"


# --- the structured-output column ---------------------------------------------------------
# A structured answer, as each API's provider made it from a recording (its native mode and,
# where the API can force a tool, the forced-tool fallback), continued on every API with a
# schema still set: the answer travels as plain text, with no call waiting for a result.


def _structured_sources() -> list[tuple[str, str]]:
    from stream_core.contract_tests.kit import load_fixtures

    return [
        (api, f.name)
        for api in SOURCES
        for f in load_fixtures(api)
        if f.call.get("output_schema") is not None and f.expect.get("output") is not None
    ]


STRUCTURED = _structured_sources()
STRUCTURED_PAIRS = [(s, t) for s in STRUCTURED for t in TARGETS]


def test_every_api_has_a_structured_answer_recording() -> None:
    assert {api for api, _ in STRUCTURED} == set(SOURCES)


def _structured_message(api: str, name: str) -> AssistantMessage:
    from stream_core.contract_tests.kit import load_fixtures, replay, whole

    fixture = next(f for f in load_fixtures(api) if f.name == name)
    message = replay(fixture, whole(fixture.body)).message
    assert message.output == fixture.expect["output"], message
    return message


@pytest.mark.parametrize(
    ("source", "target"), STRUCTURED_PAIRS, ids=[f"{s[1]}->{t}" for s, t in STRUCTURED_PAIRS]
)
def test_a_structured_answer_from_any_api_continues_on_any_other(
    source: tuple[str, str], target: str
) -> None:
    answer = _structured_message(*source)
    messages: list[Message] = [
        UserMessage(content="Weather in Paris as JSON?"),
        answer,
        UserMessage(content="And in Berlin?"),
    ]
    model = _target_model(target, vision=True).model_copy(update={"structured_output": "native"})
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        error = {"error": {"type": "invalid_request_error", "message": "x"}}
        return httpx.Response(400, json=error)

    async def main() -> None:
        with respx.mock(assert_all_mocked=True) as mock:
            mock.route(host="matrix.test").mock(side_effect=reply)
            opts = StreamOptions(
                api_key="matrix-key-0123456789", max_retries=0, output_schema=answer_schema()
            )
            await stream_core.stream(model, Context(messages=messages), opts).result()

    anyio.run(main)
    assert len(seen) == 1
    payload = json.loads(seen[0].content)
    turns = TARGETS[target].read(payload)
    if not TARGETS[target].alternates and not TARGETS[target].tools:
        # One prompt (Ollama's /api/generate): the answer is in it, as text.
        assert json.dumps(answer.output["city"]) in turns[0].texts[0]
        return
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    assert not any(t.calls or t.results for t in turns), "a structured answer left a call"
    said = json.loads("".join(turns[1].texts))
    value = said.get("answer", said) if isinstance(said, dict) else said
    assert value == answer.output


def answer_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
        "required": ["city", "temp_c"],
        "additionalProperties": False,
    }
