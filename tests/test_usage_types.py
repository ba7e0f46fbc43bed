"""A token count of the wrong JSON type ends the stream `protocol`, naming it, on every API
(issue 24: a string count ended openai-completions `protocol` but became 0 silently on
openai-responses). Text received before it is kept."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import stream_core
from stream_core import Context, Model, StreamOptions, UserMessage

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hi")])


def _sse(*events: tuple[str | None, Any]) -> bytes:
    out = b""
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out += (
            head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        ).encode()
    return out


def _chat(count: Any) -> bytes:
    return _sse(
        (None, {"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}}]}),
        (
            None,
            {
                "id": "c",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": count, "completion_tokens": 2, "total_tokens": 5},
            },
        ),
        (None, "[DONE]"),
    )


CASES: dict[str, tuple[str, str, Any]] = {
    # api: (provider, base_url, body maker)
    "anthropic-messages": (
        "anthropic",
        "https://api.anthropic.com",
        lambda n: _sse(
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {"id": "m", "usage": {"input_tokens": n, "output_tokens": 1}},
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "hi"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 2},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ),
    ),
    "openai-completions": ("openai", "https://api.openai.com/v1", _chat),
    "mistral-conversations": ("mistral", "https://api.mistral.ai", _chat),
    "openai-responses": (
        "openai",
        "https://api.openai.com/v1",
        lambda n: _sse(
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {
                        "id": "r",
                        "object": "response",
                        "status": "in_progress",
                        "output": [],
                    },
                },
            ),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {
                        "id": "r",
                        "object": "response",
                        "status": "completed",
                        "output": [],
                        "usage": {"input_tokens": n, "output_tokens": 2, "total_tokens": 5},
                    },
                },
            ),
        ),
    ),
    "google-generative-ai": (
        "google",
        "https://generativelanguage.googleapis.com/v1beta",
        lambda n: _sse(
            (
                None,
                {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": [{"text": "hi"}]},
                            "finishReason": "STOP",
                        }
                    ],
                    "usageMetadata": {
                        "promptTokenCount": n,
                        "candidatesTokenCount": 2,
                        "totalTokenCount": 5,
                    },
                },
            ),
        ),
    ),
}


@pytest.mark.parametrize("api", list(CASES))
@pytest.mark.parametrize(
    "count", ["12", 1.5, True, [3], {"n": 1}], ids=["str", "float", "bool", "list", "dict"]
)
async def test_a_token_count_of_another_type_ends_protocol(api: str, count: Any) -> None:
    provider, base_url, body = CASES[api]
    model = Model(id="m", api=api, provider=provider, base_url=base_url)
    content = body(count)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    message = await stream_core.complete(
        model, CONTEXT, StreamOptions(api_key="k-test-0001", client=client)
    )
    assert message.error is not None, api
    assert message.error.kind == "protocol", (api, message.error)
    assert "usage" in message.error.message.lower() or "token" in message.error.message.lower()
