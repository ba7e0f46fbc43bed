"""What the Anthropic provider sends: payload and headers, captured by respx.

The history mixes models on purpose: a turn written by another vendor (its reasoning,
signatures and tool-call ids mean nothing to Anthropic), a turn written by the target
model itself (its signed thinking must go back verbatim), images in a user message and in
a tool result, and a tool call whose result was never recorded.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Literal

import httpx
import pytest
import respx
from pydantic import BaseModel, Field

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import options, sse_response

pytestmark = [
    pytest.mark.anyio,
]

API_KEY = "sk-ant-request-test-0123456789"
TARGET = Model(
    id="claude-target",
    api="anthropic-messages",
    provider="anthropic",
    base_url="https://api.anthropic.com",
    reasoning=True,
    input=["text", "image"],
    max_tokens=64_000,
)
# A turn written by another vendor's model.
OTHER: dict[str, Any] = {"api": "openai-completions", "provider": "openai", "model": "gpt-x"}
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really a png").decode()
TOOL_IMAGE = base64.b64encode(b"\xff\xd8\xff\xe0 not really a jpeg").decode()
UNPAIRED_ID = "toolu_" + "7" * 70 + ".v2"  # too long and with a dot: normalized too
ZOOM = Tool(
    name="zoom",
    description="Zoom into the picture.",
    parameters={
        "type": "object",
        "properties": {
            "factor": {"type": "number", "minimum": 1, "description": "How much"},
            "region": {"$ref": "#/$defs/Region"},
        },
        "required": ["factor"],
        "additionalProperties": False,
        "$defs": {"Region": {"type": "string", "enum": ["center", "edge"]}},
    },
)

OK_BODY = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_1","usage":'
    b'{"input_tokens":12,"output_tokens":1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)


def mixed_context(target: Model = TARGET) -> Context:
    same: dict[str, Any] = {"api": target.api, "provider": target.provider, "model": target.id}
    return Context(
        system_prompt="You describe pictures.",
        messages=[
            UserMessage(
                content=[
                    TextContent(text="What is in this picture?"),
                    ImageContent(data=IMAGE, mime_type="image/png"),
                ]
            ),
            AssistantMessage(
                **OTHER,
                content=[
                    ThinkingContent(thinking="Other model reasoning.", signature="gpt-sig-1"),
                    ThinkingContent(thinking="", signature="gpt-encrypted-blob", redacted=True),
                    TextContent(text="Let me zoom in.", text_signature="msg_gpt_text"),
                    ToolCall(
                        id="call|abc.def",
                        name="zoom",
                        arguments={"factor": 2},
                        thought_signature="gemini-thought-sig",
                    ),
                ],
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id="call|abc.def",
                tool_name="zoom",
                content=[
                    TextContent(text="zoomed 2x"),
                    ImageContent(data=TOOL_IMAGE, mime_type="image/jpeg"),
                ],
            ),
            AssistantMessage(
                **same,
                content=[
                    ThinkingContent(thinking="It is a cat, zoom more.", signature="claude-sig-2"),
                    ThinkingContent(thinking="", signature="claude-redacted-blob", redacted=True),
                    ToolCall(id=UNPAIRED_ID, name="zoom", arguments={"factor": 4}),
                ],
                stop_reason="tool_use",
            ),
            UserMessage(content="Never mind, just answer."),
        ],
        tools=[ZOOM],
    )


async def send(
    context: Context, model: Model = TARGET, **option_overrides: Any
) -> tuple[httpx.Request, dict[str, Any]]:
    """Stream one message against a mocked vendor; the request that went out and its JSON."""
    url = model.base_url.rstrip("/") + "/v1/messages"
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(url).mock(return_value=sse_response([OK_BODY]))
        message = await stream_core.complete(
            model, context, options(api_key=API_KEY, **option_overrides)
        )
    assert message.error is None, message.error
    assert message.text() == "ok"
    assert route.call_count == 1
    request = route.calls[0].request
    return request, json.loads(request.content)


def blocks_of(payload: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [b for m in payload["messages"] if m["role"] == role for b in m["content"]]


def tool_uses(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in blocks_of(payload, "assistant") if b["type"] == "tool_use"]


def tool_results(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in blocks_of(payload, "user") if b["type"] == "tool_result"]


# --- handoff ------------------------------------------------------------------------------


async def test_cross_model_thinking_is_sent_as_plain_text_and_its_artifacts_dropped() -> None:
    request, payload = await send(mixed_context())

    other_turn = payload["messages"][1]
    assert other_turn["role"] == "assistant"
    assert other_turn["content"][:2] == [
        {"type": "text", "text": "Other model reasoning."},
        {"type": "text", "text": "Let me zoom in."},
    ]
    body = request.content.decode()
    # Another vendor's signatures and encrypted reasoning are unreadable here.
    for artifact in ("gpt-sig-1", "gpt-encrypted-blob", "msg_gpt_text", "gemini-thought-sig"):
        assert artifact not in body
    assert not any(b["type"] == "redacted_thinking" for b in other_turn["content"])


async def test_same_model_thinking_goes_back_verbatim_with_its_signature() -> None:
    _, payload = await send(mixed_context())

    own_turn = payload["messages"][3]
    assert own_turn["role"] == "assistant"
    assert own_turn["content"][0] == {
        "type": "thinking",
        "thinking": "It is a cat, zoom more.",
        "signature": "claude-sig-2",
    }
    assert own_turn["content"][1] == {"type": "redacted_thinking", "data": "claude-redacted-blob"}


async def test_tool_call_ids_are_normalized_and_results_renamed_to_match() -> None:
    _, payload = await send(mixed_context())

    uses = tool_uses(payload)
    assert [u["name"] for u in uses] == ["zoom", "zoom"]
    for use in uses:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", use["id"]), use["id"]
    assert uses[0]["id"] == "call_abc_def"
    assert uses[0]["input"] == {"factor": 2}
    assert len({u["id"] for u in uses}) == 2
    # Every result answers a call by the id that was actually sent.
    assert [r["tool_use_id"] for r in tool_results(payload)] == [u["id"] for u in uses]


async def test_ids_that_normalize_alike_stay_distinct_on_the_wire() -> None:
    long_a = "toolu_" + "x" * 64 + "_a"  # equal once cut to 64
    long_b = "toolu_" + "x" * 64 + "_b"
    calls = [("call|1", "read"), ("call.1", "write"), (long_a, "read"), (long_b, "write")]
    messages: list[Any] = [UserMessage(content="go")]
    for call_id, name in calls:
        messages.append(
            AssistantMessage(**OTHER, content=[ToolCall(id=call_id, name=name, arguments={})])
        )
        messages.append(
            ToolResultMessage(
                tool_call_id=call_id, tool_name=name, content=[TextContent(text=f"{name} done")]
            )
        )

    _, payload = await send(Context(messages=messages))

    uses = tool_uses(payload)
    assert len({u["id"] for u in uses}) == 4
    for use in uses:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", use["id"]), use["id"]
    results = tool_results(payload)
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    # Each result still carries its own call's output.
    assert [r["content"][0]["text"] for r in results] == [f"{u['name']} done" for u in uses]


async def test_unpaired_call_gets_an_error_result_before_the_next_user_message() -> None:
    _, payload = await send(mixed_context())

    messages = payload["messages"]
    unpaired_id = tool_uses(payload)[1]["id"]
    at = next(
        i
        for i, m in enumerate(messages)
        if m["role"] == "user" and any(b.get("tool_use_id") == unpaired_id for b in m["content"])
    )
    result = next(b for b in messages[at]["content"] if b.get("tool_use_id") == unpaired_id)
    assert result["is_error"] is True
    assert messages[at - 1]["role"] == "assistant"
    assert messages[at - 1]["content"][-1]["id"] == unpaired_id
    # The user's next words come after the repair (in the same user turn, so roles keep
    # alternating), and are the last thing sent.
    last = messages[-1]
    assert last["role"] == "user"
    assert last["content"][-1]["text"] == "Never mind, just answer."
    blocks = [b for m in messages for b in m["content"]]
    assert blocks.index(result) < blocks.index(last["content"][-1])


async def test_images_are_sent_as_base64_sources_in_user_turns_and_tool_results() -> None:
    _, payload = await send(mixed_context())

    first_user = payload["messages"][0]["content"]
    assert first_user[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": IMAGE},
    }
    answered = tool_results(payload)[0]
    assert answered["is_error"] is False
    assert answered["content"] == [
        {"type": "text", "text": "zoomed 2x"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/jpeg", "data": TOOL_IMAGE},
        },
    ]


async def test_images_become_a_note_for_a_model_without_vision() -> None:
    blind = TARGET.model_copy(update={"input": ["text"]})
    request, payload = await send(mixed_context(blind), blind)

    assert IMAGE not in request.content.decode()
    assert not any(b["type"] == "image" for b in blocks_of(payload, "user"))
    assert payload["messages"][0]["content"][0]["text"] == "What is in this picture?"


async def test_the_callers_context_is_not_mutated() -> None:
    context = mixed_context()
    before = context.model_dump()

    await send(context, cache_retention="long", reasoning="high")

    assert context.model_dump() == before


async def test_lone_surrogates_are_removed_from_outbound_text() -> None:
    context = Context(
        system_prompt="Be \ud800brief.",
        messages=[
            UserMessage(content=[TextContent(text="half \udc00emoji, whole \ud83d\ude00")]),
            AssistantMessage(
                **OTHER,
                content=[
                    ThinkingContent(thinking="thought \udfff"),
                    TextContent(text="te\ud801xt"),
                    ToolCall(id="c1", name="zoom", arguments={"factor": 1}),
                ],
            ),
            ToolResultMessage(
                tool_call_id="c1", tool_name="zoom", content=[TextContent(text="res\udbffult")]
            ),
            UserMessage(content="plain \ud800string"),
        ],
    )

    request, payload = await send(context)

    texts = [b.get("text") for b in blocks_of(payload, "assistant")] + [
        b["text"] for b in blocks_of(payload, "user") if b["type"] == "text"
    ]
    assert payload["system"][0]["text"] == "Be brief."
    assert "half emoji, whole \U0001f600" in texts
    assert {"thought ", "text", "plain string"} <= set(texts)
    assert tool_results(payload)[0]["content"] == [{"type": "text", "text": "result"}]
    request.content.decode("utf-8")  # strict UTF-8 on the wire


async def test_lone_surrogates_are_removed_from_tool_call_arguments() -> None:
    context = Context(
        messages=[
            UserMessage(content="go"),
            AssistantMessage(
                **OTHER,
                content=[ToolCall(id="c1", name="zoom", arguments={"note": "cut \ud83d"})],
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="zoom", content=[TextContent(text="r")]),
            UserMessage(content="again"),
        ]
    )

    _, payload = await send(context)

    assert tool_uses(payload)[0]["input"] == {"note": "cut "}


async def test_lone_surrogates_are_removed_from_tool_definitions() -> None:
    context = Context(
        messages=[UserMessage(content="go")],
        tools=[Tool(name="zoom", description="Zoom \udc00in.")],
    )

    _, payload = await send(context)

    assert payload["tools"][0]["description"] == "Zoom in."


# --- headers ------------------------------------------------------------------------------


async def test_headers_carry_key_version_and_ask_for_uncompressed_stream() -> None:
    request, _ = await send(mixed_context())

    headers = request.headers
    assert headers["x-api-key"] == API_KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["accept-encoding"] == "identity"
    assert headers["content-type"] == "application/json"
    assert "authorization" not in headers


async def test_model_and_option_headers_are_sent() -> None:
    model = TARGET.model_copy(update={"headers": {"x-model-header": "m"}})
    request, _ = await send(mixed_context(model), model, headers={"x-call-header": "c"})

    assert request.headers["x-model-header"] == "m"
    assert request.headers["x-call-header"] == "c"


# --- prompt caching -----------------------------------------------------------------------


def cache_markers(payload: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, cache_control) for every block that carries one."""
    found = [
        ("system", b["cache_control"]) for b in payload.get("system", []) if "cache_control" in b
    ]
    for i, m in enumerate(payload["messages"]):
        for j, b in enumerate(m["content"]):
            if "cache_control" in b:
                found.append((f"messages.{i}.{j}", b["cache_control"]))
    return found


async def test_cache_retention_none_sends_no_cache_control() -> None:
    _, payload = await send(mixed_context(), cache_retention="none")

    assert cache_markers(payload) == []


@pytest.mark.parametrize(
    ("retention", "base_url", "expected"),
    [
        ("short", "https://api.anthropic.com", {"type": "ephemeral"}),
        ("long", "https://api.anthropic.com", {"type": "ephemeral", "ttl": "1h"}),
        # A proxy or another host may not know the 1h TTL: plain ephemeral there.
        ("long", "https://anthropic-proxy.example", {"type": "ephemeral"}),
    ],
)
async def test_cache_control_on_system_and_last_block_of_last_user_message(
    retention: Literal["short", "long"], base_url: str, expected: dict[str, str]
) -> None:
    model = TARGET.model_copy(update={"base_url": base_url})
    _, payload = await send(mixed_context(model), model, cache_retention=retention)

    last = len(payload["messages"]) - 1
    last_block = len(payload["messages"][last]["content"]) - 1
    assert payload["messages"][last]["role"] == "user"
    assert cache_markers(payload) == [
        ("system", expected),
        (f"messages.{last}.{last_block}", expected),
    ]


async def test_cache_marker_lands_on_a_trailing_tool_result() -> None:
    context = mixed_context()
    context.messages = context.messages[:3]  # ends with the tool result

    _, payload = await send(context)

    last = payload["messages"][-1]["content"][-1]
    assert last["type"] == "tool_result"
    assert last["cache_control"] == {"type": "ephemeral"}


# --- thinking, sampling, limits -----------------------------------------------------------


async def test_reasoning_medium_asks_for_an_8192_token_budget_without_temperature() -> None:
    _, payload = await send(mixed_context(), reasoning="medium", temperature=0.3)

    assert payload["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert payload["max_tokens"] > 8192
    assert "temperature" not in payload


async def test_thinking_budget_always_leaves_room_for_the_answer() -> None:
    _, payload = await send(mixed_context(), reasoning="high", max_tokens=2000)

    budget = payload["thinking"]["budget_tokens"]
    assert budget >= 1024  # Anthropic's minimum
    assert payload["max_tokens"] > budget


async def test_thinking_budget_override_per_effort() -> None:
    _, payload = await send(mixed_context(), reasoning="low", thinking_budgets={"low": 4096})

    assert payload["thinking"]["budget_tokens"] == 4096


async def test_no_thinking_for_a_model_without_reasoning_and_temperature_is_sent() -> None:
    plain = TARGET.model_copy(update={"reasoning": False})
    _, payload = await send(mixed_context(plain), plain, temperature=0.3)

    assert "thinking" not in payload
    assert payload["temperature"] == 0.3


async def test_max_tokens_defaults_to_the_model_and_follows_the_option() -> None:
    _, default = await send(mixed_context())
    _, chosen = await send(mixed_context(), max_tokens=1234)

    assert default["max_tokens"] == TARGET.max_tokens
    assert chosen["max_tokens"] == 1234
    assert default["model"] == "claude-target"
    assert default["stream"] is True


# --- tools --------------------------------------------------------------------------------


async def test_tools_keep_their_full_input_schema() -> None:
    _, payload = await send(mixed_context())

    assert payload["tools"] == [
        {"name": "zoom", "description": "Zoom into the picture.", "input_schema": ZOOM.parameters}
    ]


class Point(BaseModel):
    x: float
    y: float


class DrawPolygon(BaseModel):
    """Draw a closed polygon on the canvas."""

    points: list[Point] = Field(min_length=3, description="Corners, in order")
    color: Literal["red", "green"] = "red"


async def test_tool_from_pydantic_model_gives_a_usable_schema() -> None:
    tool = Tool.from_model(DrawPolygon)
    context = Context(messages=[UserMessage(content="draw a triangle")], tools=[tool])

    _, payload = await send(context)

    sent = payload["tools"][0]
    assert sent["name"] == "DrawPolygon"
    assert sent["description"] == "Draw a closed polygon on the canvas."
    schema = sent["input_schema"]
    assert schema == tool.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["points"]
    assert "title" not in schema and "description" not in schema
    # Every reference resolves inside the schema that was sent.
    refs = re.findall(r'"\$ref": "#/\$defs/(\w+)"', json.dumps(schema))
    assert refs and all(ref in schema["$defs"] for ref in refs)
    # Arguments a model writes against that schema validate into the caller's type.
    args = {"points": [{"x": 0, "y": 0}, {"x": 1, "y": 0}, {"x": 0, "y": 1}]}
    assert len(DrawPolygon.model_validate(args).points) == 3


# --- on_payload ---------------------------------------------------------------------------


async def test_on_payload_sees_the_payload_and_its_model() -> None:
    seen: list[tuple[dict[str, Any], Model]] = []

    def hook(payload: dict[str, Any], model: Model) -> None:
        seen.append((json.loads(json.dumps(payload)), model))

    _, payload = await send(mixed_context(), on_payload=hook)

    assert len(seen) == 1
    assert seen[0][0] == payload
    assert seen[0][1] is TARGET


async def test_on_payload_can_replace_the_payload() -> None:
    def hook(payload: dict[str, Any], model: Model) -> dict[str, Any]:
        return {**payload, "metadata": {"user_id": "u-42"}, "top_k": 5}

    _, payload = await send(mixed_context(), on_payload=hook)

    assert payload["metadata"] == {"user_id": "u-42"}
    assert payload["top_k"] == 5
    assert payload["model"] == "claude-target"
