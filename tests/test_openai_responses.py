"""The OpenAI Responses provider: what it sends (payload, URL, headers, captured by respx),
what goes back to the same model after a turn, and stream shapes the recordings do not show.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    ServerToolCall,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import API_KEY, Run, options, sse_response

API = "openai-responses"
TARGET = Model(
    id="gpt-target",
    api=API,
    provider="openai",
    base_url="https://api.openai.com/v1",
    reasoning=True,
    input=["text", "image"],
)
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really a png").decode()
WEATHER = Tool(
    name="weather",
    description="Weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _ev(kind: str, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, **fields}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _response(status: str = "completed", **fields: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "output": [], **fields}


USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 10},
    "total_tokens": 130,
}
COMPLETED = _ev("response.completed", response=_response(usage=USAGE))


def _run(*events: bytes, model: Model | None = None) -> Run:
    async def main() -> Run:
        return await _run_model(model or TARGET, sse_response([b"".join(events)]))

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


async def _run_model(
    model: Model,
    response: httpx.Response,
    context: Context | None = None,
    *,
    host: str | None = None,
    **opts: Any,
) -> Run:
    events: list[Any] = []
    with respx.mock(assert_all_mocked=True) as mock:
        host = host or httpx.URL(model.base_url).host
        route = mock.route(host=host).mock(return_value=response)
        ctx = context or Context(messages=[UserMessage(content="hi")])
        async with stream_core.stream(model, ctx, options(**opts)) as s:
            async for event in s:
                events.append(event)
            message = await s.result()
    return Run(events, message, route.call_count, [c.request for c in route.calls])


def _sent(
    context: Context, model: Model = TARGET, *, host: str | None = None, **opts: Any
) -> httpx.Request:
    body = b"".join([_ev("response.created", response=_response("in_progress")), COMPLETED])

    async def main() -> Run:
        return await _run_model(model, sse_response([body]), context, host=host, **opts)

    run = anyio.run(main)
    assert run.message.stop_reason == "stop", run.message.error
    return run.requests[0]


# --- a turn of our own, streamed, then sent back ------------------------------------------

REASONING_ITEM = {
    "id": "rs_1",
    "type": "reasoning",
    "encrypted_content": "gAAAA-encrypted",
    "summary": [
        {"type": "summary_text", "text": "**Plan**"},
        {"type": "summary_text", "text": "Look it up."},
    ],
}
OWN_TURN = [
    _ev("response.created", response=_response("in_progress")),
    _ev(
        "response.output_item.added",
        output_index=0,
        item={"id": "rs_1", "type": "reasoning", "summary": []},
    ),
    _ev(
        "response.reasoning_summary_text.delta",
        item_id="rs_1",
        output_index=0,
        summary_index=0,
        delta="**Plan**",
    ),
    _ev(
        "response.reasoning_summary_text.delta",
        item_id="rs_1",
        output_index=0,
        summary_index=1,
        delta="Look it up.",
    ),
    _ev("response.output_item.done", output_index=0, item=REASONING_ITEM),
    _ev(
        "response.output_item.added",
        output_index=1,
        item={"id": "msg_1", "type": "message", "content": [], "phase": "commentary"},
    ),
    _ev("response.output_text.delta", item_id="msg_1", output_index=1, delta="Checking."),
    _ev(
        "response.output_item.done",
        output_index=1,
        item={
            "id": "msg_1",
            "type": "message",
            "phase": "commentary",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
    ),
    _ev(
        "response.output_item.added",
        output_index=2,
        item={
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": "",
        },
    ),
    _ev("response.function_call_arguments.delta", item_id="fc_1", output_index=2, delta='{"ci'),
    _ev("response.function_call_arguments.delta", item_id="fc_1", output_index=2, delta='ty":'),
    _ev(
        "response.output_item.done",
        output_index=2,
        item={
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
        },
    ),
    _ev("response.completed", response=_response(usage=USAGE, service_tier="flex")),
]


def test_own_turn_is_read_with_everything_the_vendor_needs_back() -> None:
    run = _run(*OWN_TURN)
    m = run.message
    thinking, text, call = m.content
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "**Plan**\n\nLook it up." and not thinking.redacted
    assert json.loads(thinking.signature or "") == REASONING_ITEM
    assert isinstance(text, TextContent) and text.text == "Checking."
    assert json.loads(text.text_signature or "") == {"id": "msg_1", "phase": "commentary"}
    # The arguments' end arrived only in output_item.done: it is streamed from there.
    assert isinstance(call, ToolCall) and call.arguments == {"city": "Paris"}
    assert call.id == "call_1" and call.thought_signature == "fc_1"
    assert m.stop_reason == "tool_use" and m.raw_stop_reason == "completed"
    assert m.response_id == "resp_1"
    u = m.usage
    assert (u.input, u.output, u.cache_read, u.reasoning, u.total_tokens) == (60, 30, 40, 10, 130)
    assert m.model_dump()["service_tier"] == "flex"


def test_own_turn_goes_back_verbatim_and_other_vendors_turns_lose_their_artifacts() -> None:
    own = _run(*OWN_TURN).message
    other = AssistantMessage(
        api="anthropic-messages",
        provider="anthropic",
        model="claude-x",
        content=[
            ThinkingContent(thinking="Claude thought.", signature="sig-anthropic"),
            ThinkingContent(signature="opaque", redacted=True),
            TextContent(text="Let me look.", text_signature="whatever"),
            ToolCall(id="toolu_01:odd", name="weather", arguments={"city": "Rome"}),
        ],
        stop_reason="tool_use",
    )
    context = Context(
        system_prompt="Be brief.",
        messages=[
            UserMessage(
                content=[
                    TextContent(text="Look:"),
                    ImageContent(data=IMAGE, mime_type="image/png"),
                ]
            ),
            other,
            ToolResultMessage(
                tool_call_id="toolu_01:odd",
                tool_name="weather",
                content=[
                    TextContent(text="sunny"),
                    ImageContent(data=IMAGE, mime_type="image/png"),
                ],
            ),
            UserMessage(content="And Paris?"),
            own,
            ToolResultMessage(
                tool_call_id="call_1", tool_name="weather", content=[TextContent(text="rain")]
            ),
        ],
        tools=[WEATHER],
    )
    request = _sent(context, reasoning="high", max_tokens=500, session_id="sess-1")
    assert str(request.url) == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    payload = json.loads(request.content)
    assert payload["model"] == "gpt-target"
    assert payload["stream"] is True and payload["store"] is False
    assert payload["include"] == ["reasoning.encrypted_content"]
    assert payload["reasoning"] == {"effort": "high", "summary": "auto"}
    assert payload["max_output_tokens"] == 500
    assert payload["prompt_cache_key"] == "sess-1"
    assert payload["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Weather in a city.",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    image_url = f"data:image/png;base64,{IMAGE}"
    assert payload["input"] == [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look:"},
                {"type": "input_image", "detail": "auto", "image_url": image_url},
            ],
        },
        # Another vendor's turn: thinking as text, redacted thinking dropped, no item ids.
        {"role": "assistant", "content": "Claude thought."},
        {"role": "assistant", "content": "Let me look."},
        {
            "type": "function_call",
            "call_id": "toolu_01_odd",
            "name": "weather",
            "arguments": '{"city": "Rome"}',
        },
        {
            "type": "function_call_output",
            "call_id": "toolu_01_odd",
            "output": [
                {"type": "input_text", "text": "sunny"},
                {"type": "input_image", "detail": "auto", "image_url": image_url},
            ],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "And Paris?"}]},
        # Our own turn: the reasoning item verbatim, items with their ids and phase.
        REASONING_ITEM,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            "phase": "commentary",
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city": "Paris"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
    ]


def test_item_ids_are_not_sent_when_the_turns_reasoning_cannot_be() -> None:
    """OpenAI rejects a function_call item whose reasoning item is missing."""
    own = AssistantMessage(
        api=API,
        provider="openai",
        model="gpt-target",
        content=[
            ThinkingContent(thinking="no encrypted item kept"),
            ToolCall(id="call_9", name="weather", arguments={}, thought_signature="fc_9"),
        ],
    )
    context = Context(
        messages=[
            UserMessage(content="hi"),
            own,
            ToolResultMessage(tool_call_id="call_9", tool_name="weather"),
        ]
    )
    items = json.loads(_sent(context).content)["input"]
    assert items[1] == {
        "type": "function_call",
        "call_id": "call_9",
        "name": "weather",
        "arguments": "{}",
    }
    assert items[2] == {
        "type": "function_call_output",
        "call_id": "call_9",
        "output": "(no output)",
    }


def test_request_knobs_and_a_model_without_reasoning() -> None:
    model = TARGET.model_copy(update={"reasoning": False, "input": ["text"]})
    context = Context(
        system_prompt="sys",
        messages=[
            UserMessage(
                content=[TextContent(text="x"), ImageContent(data=IMAGE, mime_type="image/png")]
            )
        ],
    )
    payload = json.loads(
        _sent(
            context,
            model,
            temperature=0.2,
            session_id="s",
            cache_retention="none",
            extra={"service_tier": "flex"},
            tool_choice="none",
        ).content
    )
    assert payload["input"][0] == {"role": "system", "content": "sys"}
    assert payload["input"][1]["content"][1] == {
        "type": "input_text",
        "text": "(image omitted: this model takes no images)",
    }
    for absent in ("reasoning", "include", "prompt_cache_key", "max_output_tokens"):
        assert absent not in payload
    assert payload["temperature"] == 0.2
    assert payload["service_tier"] == "flex"
    assert "tool_choice" not in payload  # no tools: nothing to choose from
    long = json.loads(_sent(context, session_id="s", cache_retention="long").content)
    assert long["prompt_cache_retention"] == "24h"


# --- Azure --------------------------------------------------------------------------------


def test_azure_v1_url_api_key_header_and_deployment() -> None:
    model = Model(
        id="gpt-5-mini",
        api=API,
        provider="azure-openai",
        base_url="https://myres.openai.azure.com/openai/v1",
        reasoning=True,
    )
    request = _sent(
        Context(messages=[UserMessage(content="hi")]), model, extra={"deployment": "my-dep"}
    )
    assert str(request.url) == "https://myres.openai.azure.com/openai/v1/responses"
    assert request.headers["api-key"] == API_KEY and "authorization" not in request.headers
    assert json.loads(request.content)["model"] == "my-dep"


def test_azure_classic_url_gets_an_api_version() -> None:
    model = Model(
        id="my-dep",
        api=API,
        provider="azure-openai",
        base_url="https://myres.openai.azure.com/openai",
    )
    request = _sent(Context(messages=[UserMessage(content="hi")]), model)
    assert request.url.path == "/openai/responses"
    assert request.url.params["api-version"] == "2025-04-01-preview"
    request = _sent(
        Context(messages=[UserMessage(content="hi")]), model, extra={"api_version": "2025-03-01"}
    )
    assert request.url.params["api-version"] == "2025-03-01"


def test_azure_content_filter_error_body_is_kind_content_filter() -> None:
    body = {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
            "content management policy.",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    model = Model(
        id="dep", api=API, provider="azure-openai", base_url="https://r.openai.azure.com/openai/v1"
    )

    async def main() -> Run:
        return await _run_model(model, httpx.Response(400, json=body))

    run = anyio.run(main)
    error = run.message.error
    assert error is not None and error.kind == "content_filter" and error.status_code == 400
    assert "content management policy" in error.message and not error.retryable


# --- stream shapes the recordings do not show ----------------------------------------------


def _message_item(*parts: dict[str, Any], id: str = "msg_1") -> dict[str, Any]:
    return {"id": id, "type": "message", "role": "assistant", "content": list(parts)}


def test_refusal_ends_error_refusal_keeping_the_text() -> None:
    run = _run(
        _ev("response.output_item.added", output_index=0, item=_message_item()),
        _ev("response.refusal.delta", item_id="msg_1", output_index=0, delta="I can't help"),
        _ev(
            "response.output_item.done",
            output_index=0,
            item=_message_item({"type": "refusal", "refusal": "I can't help with that."}),
        ),
        COMPLETED,
    )
    m = run.message
    assert m.text() == "I can't help with that."
    assert m.stop_reason == "error" and m.error is not None and m.error.kind == "refusal"
    assert "I can't help with that." in m.error.message
    assert m.usage.output == 30


def test_incomplete_content_filter_is_error_content_filter() -> None:
    run = _run(
        _ev("response.output_text.delta", item_id="msg_1", output_index=0, delta="Partial"),
        _ev(
            "response.incomplete",
            response=_response(
                "incomplete", incomplete_details={"reason": "content_filter"}, usage=USAGE
            ),
        ),
    )
    m = run.message
    assert m.text() == "Partial" and m.raw_stop_reason == "content_filter"
    assert m.stop_reason == "error" and m.error is not None and m.error.kind == "content_filter"
    assert m.usage.input == 60


def test_text_before_content_part_added_and_without_item_added_is_kept() -> None:
    run = _run(
        _ev("response.output_text.delta", item_id="msg_1", output_index=0, delta="Hel"),
        _ev(
            "response.content_part.added",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            part={"type": "output_text", "text": ""},
        ),
        _ev("response.output_text.delta", item_id="msg_1", output_index=0, delta="lo"),
        COMPLETED,
    )
    assert run.message.text() == "Hello" and run.message.stop_reason == "stop"


def test_failed_response_codes_become_error_kinds() -> None:
    cases = {
        "rate_limit_exceeded": "rate_limit",
        "server_error": "server",
        "context_length_exceeded": "context_overflow",
        "invalid_prompt": "invalid_request",
        "server_is_overloaded": "overloaded",
    }
    for code, kind in cases.items():
        failed = _response("failed", error={"code": code, "message": f"it failed: {code}"})
        run = _run(
            _ev("response.output_text.delta", item_id="m", output_index=0, delta="so far"),
            _ev("response.failed", response={**failed, "usage": USAGE}),
        )
        m = run.message
        assert m.stop_reason == "error" and m.error is not None, code
        assert m.error.kind == kind, (code, m.error)
        assert f"it failed: {code}" in m.error.message
        assert m.text() == "so far" and m.usage.output == 30  # content and usage kept


def test_documented_error_event_shape() -> None:
    run = _run(
        _ev("error", code="rate_limit_exceeded", message="Slow down", param=None),
    )
    error = run.message.error
    assert error is not None and error.kind == "rate_limit" and error.retryable
    assert error.message == "Slow down"


def test_server_tool_items_are_kept_and_finished_items_without_deltas_are_read() -> None:
    run = _run(
        _ev(
            "response.output_item.added",
            output_index=0,
            item={"id": "ws_1", "type": "web_search_call", "status": "in_progress"},
        ),
        _ev(
            "response.output_item.done",
            output_index=0,
            item={"id": "ws_1", "type": "web_search_call", "status": "completed"},
        ),
        _ev(
            "response.output_item.done",
            output_index=1,
            item={"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "enc"},
        ),
        _ev(
            "response.output_item.done",
            output_index=2,
            item=_message_item({"type": "output_text", "text": "Found it."}),
        ),
        COMPLETED,
    )
    search, thinking, text = run.message.content
    assert isinstance(search, ServerToolCall) and search.id == "ws_1"
    assert search.kind == "web_search" and search.raw == {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
    }
    assert isinstance(thinking, ThinkingContent) and thinking.redacted and not thinking.thinking
    assert json.loads(thinking.signature or "")["encrypted_content"] == "enc"
    assert isinstance(text, TextContent) and text.text == "Found it."


def test_a_completed_response_alone_is_read_whole() -> None:
    output = [
        _message_item({"type": "output_text", "text": "Only the end."}),
        {
            "id": "fc_2",
            "type": "function_call",
            "call_id": "call_2",
            "name": "f",
            "arguments": "{}",
        },
    ]
    run = _run(_ev("response.completed", response=_response(output=output, usage=USAGE)))
    m = run.message
    assert m.text() == "Only the end." and m.stop_reason == "tool_use"
    assert [c.id for c in m.tool_calls()] == ["call_2"]


def test_wrong_json_type_is_a_protocol_error_naming_the_event() -> None:
    run = _run(
        _ev("response.output_text.delta", item_id="m", output_index=0, delta="ok"),
        _ev("response.output_text.delta", item_id="m", output_index=0, delta=7),
    )
    error = run.message.error
    assert error is not None and error.kind == "protocol"
    assert "response.output_text.delta" in error.message and run.message.text() == "ok"


def test_non_streamed_json_answer_gives_the_same_message_as_the_stream() -> None:
    streamed = _run(*OWN_TURN).message
    whole = _response(
        output=[
            REASONING_ITEM,
            {
                "id": "msg_1",
                "type": "message",
                "phase": "commentary",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "call_1",
                "name": "weather",
                "arguments": '{"city":"Paris"}',
            },
        ],
        usage=USAGE,
        service_tier="flex",
    )

    async def main() -> Run:
        return await _run_model(TARGET, httpx.Response(200, json=whole))

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    skip = {"timestamp", "ttft_ms", "duration_ms"}
    assert run.message.model_dump(exclude=skip) == streamed.model_dump(exclude=skip)

    incomplete = _response(
        "incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        output=[_message_item({"type": "output_text", "text": "Cut"})],
        usage=USAGE,
    )

    async def cut() -> Run:
        return await _run_model(TARGET, httpx.Response(200, json=incomplete))

    m = anyio.run(cut).message
    assert m.stop_reason == "length" and m.text() == "Cut"


def test_key_env_per_provider() -> None:
    azure = Model(id="d", api=API, provider="azure-openai", base_url="https://r.openai.azure.com")
    local = Model(id="m", api=API, provider="my-vllm", base_url="http://localhost:8000/v1")
    assert stream_core.api_key_env(TARGET) == ("OPENAI_API_KEY", True)
    assert stream_core.api_key_env(azure) == ("AZURE_OPENAI_API_KEY", True)
    assert stream_core.api_key_env(local) == ("MY_VLLM_API_KEY", False)


def test_catalog_azure_model_takes_its_endpoint_from_the_environment(monkeypatch: Any) -> None:
    model = stream_core.get_model("azure-openai", "gpt-5-mini", api="openai-responses")
    context = Context(messages=[UserMessage(content="hi")])
    monkeypatch.delenv("AZURE_OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "myres")
    request = _sent(context, model, host="myres.openai.azure.com")
    assert str(request.url) == "https://myres.openai.azure.com/openai/v1/responses"
    assert json.loads(request.content)["model"] == "gpt-5-mini"

    monkeypatch.delenv("AZURE_OPENAI_RESOURCE_NAME")
    # Neither setting: the call raises, naming them; the template host is never sent to.
    with pytest.raises(ValueError, match="AZURE_OPENAI_RESOURCE_NAME"):
        stream_core.stream(model, context, options())


def test_arguments_before_their_item_and_response_done_as_the_terminal_event() -> None:
    item = {"id": "fc_3", "type": "function_call", "call_id": "call_3", "name": "f"}
    run = _run(
        _ev("response.function_call_arguments.delta", item_id="fc_3", output_index=0, delta="{"),
        _ev("response.output_item.added", output_index=0, item={**item, "arguments": ""}),
        _ev("response.function_call_arguments.delta", item_id="fc_3", output_index=0, delta="}"),
        _ev("response.done", response=_response(usage=USAGE)),
    )
    (call,) = run.message.content
    assert isinstance(call, ToolCall) and call.arguments == {} and not call.truncated
    assert call.id == "call_3" and call.name == "f" and call.thought_signature == "fc_3"
    assert run.message.stop_reason == "tool_use" and run.message.usage.output == 30


def test_flex_and_priority_tiers_change_the_cost() -> None:
    priced = TARGET.model_copy(
        update={"prices": stream_core.ModelPrices(input=1.0, output=10.0, cache_read=0.1)}
    )
    costs = {}
    for tier in ("default", "flex", "priority"):
        done = _ev("response.completed", response=_response(usage=USAGE, service_tier=tier))
        m = _run(done, model=priced).message
        assert m.usage.cost is not None and m.model_dump()["service_tier"] == tier
        costs[tier] = m.usage.cost.total
    # 60 input, 30 output, 40 cached at list price: 60 + 300 + 4 = 364 per million.
    assert abs(costs["default"] - 364e-6) < 1e-12
    assert abs(costs["flex"] - costs["default"] / 2) < 1e-12
    assert abs(costs["priority"] - costs["default"] * 2) < 1e-12
