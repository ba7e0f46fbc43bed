"""What the OpenAI Chat Completions provider sends: payload and headers, captured by respx.

The history mixes models on purpose: a turn written by another vendor (an Anthropic model:
its signed and redacted thinking mean nothing here), a turn written by the target model
itself, images in a user message and in a tool result (tool messages take text only), and
a tool call whose result was never recorded.
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

API_KEY = "sk-openai-request-test-0123456789"
TARGET = Model(
    id="gpt-target",
    api="openai-completions",
    provider="openai",
    base_url="https://api.openai.com/v1",
    input=["text", "image"],
)
# A turn written by another vendor's model.
OTHER: dict[str, Any] = {
    "api": "anthropic-messages",
    "provider": "anthropic",
    "model": "claude-x",
}
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really a png").decode()
TOOL_IMAGE = base64.b64encode(b"\xff\xd8\xff\xe0 not really a jpeg").decode()
UNPAIRED_ID = "call_" + "7" * 50 + ":v2"  # too long for OpenAI's 40, with a colon
ZOOM = Tool(
    name="zoom",
    description="Zoom into the picture.",
    parameters={
        "type": "object",
        "properties": {
            "factor": {"type": "number", "minimum": 1},
            "region": {"$ref": "#/$defs/Region"},
        },
        "required": ["factor"],
        "$defs": {"Region": {"type": "string", "enum": ["center", "edge"]}},
    },
)

OK_BODY = (
    b'data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":"ok"},"finish_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":12,'
    b'"completion_tokens":1,"total_tokens":13}}\n\n'
    b"data: [DONE]\n\n"
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
                    ThinkingContent(thinking="Other model reasoning.", signature="claude-sig-1"),
                    ThinkingContent(thinking="", signature="claude-redacted-blob", redacted=True),
                    TextContent(text="Let me zoom in.", text_signature="msg_claude_text"),
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
                    ThinkingContent(
                        thinking="Own reasoning, a cat.", signature="reasoning_content"
                    ),
                    ThinkingContent(thinking="", signature="own-encrypted-blob", redacted=True),
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
    url = model.base_url.rstrip("/") + "/chat/completions"
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


def by_role(payload: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [m for m in payload["messages"] if m["role"] == role]


def sent_calls(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for m in by_role(payload, "assistant") for c in m.get("tool_calls") or []]


# --- handoff ------------------------------------------------------------------------------


async def test_cross_model_thinking_is_sent_as_plain_text_and_its_artifacts_dropped() -> None:
    request, payload = await send(mixed_context())

    other_turn = payload["messages"][2]
    assert other_turn["role"] == "assistant"
    assert other_turn["content"] == "Other model reasoning.\n\nLet me zoom in."
    body = request.content.decode()
    for artifact in ("claude-sig-1", "claude-redacted-blob", "msg_claude_text", "gemini-thought"):
        assert artifact not in body


async def test_same_model_reasoning_is_not_passed_off_as_visible_text() -> None:
    request, payload = await send(mixed_context())

    own_turn = payload["messages"][5]
    assert own_turn["role"] == "assistant"
    assert own_turn["content"] == ""  # the compat default: see test_empty_content_*
    assert [c["function"]["name"] for c in own_turn["tool_calls"]] == ["zoom"]
    body = request.content.decode()
    assert "Own reasoning, a cat." not in body
    assert "own-encrypted-blob" not in body


async def test_tool_call_ids_are_normalized_and_results_renamed_to_match() -> None:
    _, payload = await send(mixed_context())

    calls = sent_calls(payload)
    for call in calls:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", call["id"]), call["id"]
        assert call["type"] == "function"
    assert calls[0]["id"] == "call_abc_def"
    assert json.loads(calls[0]["function"]["arguments"]) == {"factor": 2}
    assert len({c["id"] for c in calls}) == 2
    assert [m["tool_call_id"] for m in by_role(payload, "tool")] == [c["id"] for c in calls]


async def test_ids_that_normalize_alike_stay_distinct_on_the_wire() -> None:
    long_a = "call_" + "x" * 40 + "_a"  # equal once cut to 40
    long_b = "call_" + "x" * 40 + "_b"
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

    sent = sent_calls(payload)
    assert len({c["id"] for c in sent}) == 4
    for call in sent:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", call["id"]), call["id"]
    tools = by_role(payload, "tool")
    assert [t["tool_call_id"] for t in tools] == [c["id"] for c in sent]
    # Each result still carries its own call's output.
    assert [t["content"] for t in tools] == [f"{c['function']['name']} done" for c in sent]


async def test_unpaired_call_gets_an_error_result_before_the_next_user_message() -> None:
    _, payload = await send(mixed_context())

    messages = payload["messages"]
    unpaired_id = sent_calls(payload)[1]["id"]
    at = next(i for i, m in enumerate(messages) if m.get("tool_call_id") == unpaired_id)
    assert messages[at - 1]["role"] == "assistant"
    assert messages[at - 1]["tool_calls"][-1]["id"] == unpaired_id
    assert "no result" in messages[at]["content"].lower()
    assert messages[at + 1] == {"role": "user", "content": "Never mind, just answer."}
    assert at + 1 == len(messages) - 1


async def test_images_are_data_urls_and_tool_result_images_follow_in_a_user_message() -> None:
    _, payload = await send(mixed_context())

    messages = payload["messages"]
    assert messages[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{IMAGE}"},
    }
    tool_at = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    # Tool messages take text only.
    assert messages[tool_at]["content"] == "zoomed 2x"
    follow = messages[tool_at + 1]
    assert follow["role"] == "user"
    assert {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{TOOL_IMAGE}"}} in (
        follow["content"]
    )
    # ...and come before the next assistant turn.
    assert messages[tool_at + 2]["role"] == "assistant"


async def test_images_become_a_note_for_a_model_without_vision() -> None:
    blind = TARGET.model_copy(update={"input": ["text"]})
    request, payload = await send(mixed_context(blind), blind)

    body = request.content.decode()
    assert IMAGE not in body and TOOL_IMAGE not in body
    assert "image_url" not in body
    assert payload["messages"][1]["content"][0] == {
        "type": "text",
        "text": "What is in this picture?",
    }


async def test_the_callers_context_is_not_mutated() -> None:
    context = mixed_context()
    before = context.model_dump()

    await send(context, max_tokens=100)

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

    messages = payload["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["content"] == [{"type": "text", "text": "half emoji, whole \U0001f600"}]
    assert messages[2]["content"] == "thought \n\ntext"
    assert messages[3]["content"] == "result"
    assert messages[4]["content"] == "plain string"
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

    assert json.loads(sent_calls(payload)[0]["function"]["arguments"]) == {"note": "cut "}


async def test_lone_surrogates_are_removed_from_tool_definitions() -> None:
    context = Context(
        messages=[UserMessage(content="go")],
        tools=[Tool(name="zoom", description="Zoom \udc00in.")],
    )

    _, payload = await send(context)

    assert payload["tools"][0]["function"]["description"] == "Zoom in."


# --- headers and endpoint compat ----------------------------------------------------------


async def test_headers_carry_a_bearer_key_and_ask_for_uncompressed_stream() -> None:
    request, _ = await send(mixed_context())

    headers = request.headers
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["accept-encoding"] == "identity"
    assert headers["content-type"] == "application/json"
    assert "api-key" not in headers and "x-api-key" not in headers


async def test_azure_sends_the_key_in_an_api_key_header() -> None:
    azure = Model(
        id="my-deployment",
        api="openai-completions",
        provider="azure-openai",
        base_url="https://myres.openai.azure.com/openai/v1",
    )
    request, payload = await send(Context(messages=[UserMessage(content="hi")]), azure)

    assert request.headers["api-key"] == API_KEY
    assert "authorization" not in request.headers
    assert request.headers["accept-encoding"] == "identity"
    assert payload["model"] == "my-deployment"


async def test_usage_is_requested_by_default() -> None:
    _, payload = await send(mixed_context())

    assert payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}


async def test_include_usage_can_be_switched_off_per_endpoint() -> None:
    model = TARGET.model_copy(update={"compat": {"include_usage": False}})
    _, payload = await send(mixed_context(model), model)

    assert "stream_options" not in payload
    assert payload["stream"] is True


@pytest.mark.parametrize(
    ("provider", "compat", "field"),
    [
        ("openai", {}, "max_completion_tokens"),
        ("openai", {"max_tokens_field": "max_tokens"}, "max_tokens"),
        ("together", {}, "max_tokens"),
        ("together", {"max_tokens_field": "max_completion_tokens"}, "max_completion_tokens"),
    ],
)
async def test_max_tokens_goes_in_the_endpoints_field(
    provider: str, compat: dict[str, Any], field: str
) -> None:
    model = TARGET.model_copy(update={"provider": provider, "compat": compat})
    _, payload = await send(Context(messages=[UserMessage(content="hi")]), model, max_tokens=321)

    assert payload[field] == 321
    other = ({"max_tokens", "max_completion_tokens"} - {field}).pop()
    assert other not in payload


async def test_reasoning_model_gets_developer_role_and_effort() -> None:
    model = TARGET.model_copy(update={"reasoning": True})
    _, payload = await send(mixed_context(model), model, reasoning="low")

    assert payload["messages"][0] == {"role": "developer", "content": "You describe pictures."}
    assert payload["reasoning_effort"] == "low"


async def test_plain_model_gets_system_role_and_temperature() -> None:
    _, payload = await send(mixed_context(), temperature=0.2)

    assert payload["messages"][0] == {"role": "system", "content": "You describe pictures."}
    assert payload["temperature"] == 0.2
    assert "reasoning_effort" not in payload


# --- tools --------------------------------------------------------------------------------


async def test_tools_are_sent_as_function_tools() -> None:
    _, payload = await send(mixed_context())

    assert payload["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "zoom",
                "description": "Zoom into the picture.",
                "parameters": ZOOM.parameters,
            },
        }
    ]


class Point(BaseModel):
    x: float
    y: float


class DrawPolygon(BaseModel):
    """Draw a closed polygon on the canvas."""

    points: list[Point] = Field(min_length=3, description="Corners, in order")
    color: Literal["red", "green"] = "red"


async def test_tool_from_pydantic_model_gives_a_usable_schema() -> None:
    tool = Tool.from_model(DrawPolygon, name="draw")
    context = Context(messages=[UserMessage(content="draw a triangle")], tools=[tool])

    _, payload = await send(context)

    function = payload["tools"][0]["function"]
    assert function["name"] == "draw"
    assert function["description"] == "Draw a closed polygon on the canvas."
    schema = function["parameters"]
    assert schema == tool.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["points"]
    refs = re.findall(r'"\$ref": "#/\$defs/(\w+)"', json.dumps(schema))
    assert refs and all(ref in schema["$defs"] for ref in refs)
    args = {"points": [{"x": 0, "y": 0}, {"x": 1, "y": 0}, {"x": 0, "y": 1}], "color": "green"}
    assert DrawPolygon.model_validate(args).color == "green"


async def test_tool_choice_names_a_tool() -> None:
    _, payload = await send(mixed_context(), tool_choice={"tool": "zoom"})

    assert payload["tool_choice"] == {"type": "function", "function": {"name": "zoom"}}


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
        return {**payload, "seed": 7, "messages": [{"role": "user", "content": "replaced"}]}

    _, payload = await send(mixed_context(), on_payload=hook)

    assert payload["seed"] == 7
    assert payload["messages"] == [{"role": "user", "content": "replaced"}]
    assert payload["model"] == "gpt-target"
