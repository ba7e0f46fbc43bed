"""Claude on Vertex AI (issue 27, point 7), from the user's side: provider
`anthropic-vertex` sends the Messages API to Vertex's `streamRawPredict` with the project
and location filled in, `anthropic_version: vertex-2023-10-16` in the body and no model
field, an OAuth bearer token and never an Anthropic key; the answer reads as Claude's."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from stream_core import Context, StreamOptions, UserMessage, complete, get_model, list_models

pytestmark = pytest.mark.anyio

CTX = Context(messages=[UserMessage(content="Hi.")])
ANSWER = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"model":"claude-sonnet-4-5","usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hello"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
URL = (
    "https://us-east5-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-east5/"
    "publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
)


@pytest.fixture(autouse=True)
def _project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-sent")


def test_the_catalog_has_claude_under_vertex_ids() -> None:
    ids = {m.id for m in list_models("anthropic-vertex")}
    assert {"claude-sonnet-4-5@20250929", "claude-opus-4-7"} <= ids
    assert "claude-sonnet-4-5" not in ids  # Vertex has no undated alias of a snapshot
    m = get_model("anthropic-vertex", "claude-sonnet-4-5@20250929")
    assert m.api == "anthropic-messages" and m.prices.input == 3.0


async def test_a_call_goes_to_stream_raw_predict_with_a_bearer_token() -> None:
    model = get_model("anthropic-vertex", "claude-sonnet-4-5@20250929")
    with respx.mock:
        route = respx.post(URL).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=ANSWER
            )
        )
        message = await complete(
            model, CTX, StreamOptions(headers={"authorization": "Bearer ya29.token"})
        )
    assert message.error is None and message.text() == "Hello"
    request = route.calls[0].request
    body = json.loads(request.content)
    assert body["anthropic_version"] == "vertex-2023-10-16" and "model" not in body
    assert body["stream"] is True and body["messages"][0]["role"] == "user"
    assert request.headers["authorization"] == "Bearer ya29.token"
    assert "x-api-key" not in request.headers and "anthropic-version" not in request.headers
    assert "sk-ant-never-sent" not in str(request.headers)


async def test_without_a_project_the_call_raises_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    monkeypatch.delenv("GCLOUD_PROJECT", raising=False)
    model = get_model("anthropic-vertex", "claude-opus-4-7")
    with pytest.raises(ValueError, match="GOOGLE_CLOUD_PROJECT"):
        await complete(model, CTX, StreamOptions())


async def test_without_credentials_the_message_says_how_to_get_them() -> None:
    model = get_model("anthropic-vertex", "claude-opus-4-7")
    import stream_core.providers._vertex as vertex

    if vertex.google_auth_installed():
        pytest.skip("google-auth is installed: it would look for real credentials")
    message = await complete(model, CTX, StreamOptions())
    assert message.error is not None and message.error.kind == "auth"
    assert "stream-core[vertex]" in message.error.message
