"""Bedrock Converse: what goes out (payload, URL, SigV4 or bearer auth) and the stream shapes
the recordings do not hold (exceptions, guardrail stops, redacted reasoning, cache usage, an
EOF after `messageStop`, the non-streamed answer)."""

from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import event_stream_frame
from stream_core.providers import _aws

API = "bedrock-converse-stream"
CLAUDE = stream_core.get_model("amazon-bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN0123456789abcdef"
CLOCK = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really a png").decode()
TOOL = Tool(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


def frame(event: str, payload: dict[str, Any]) -> bytes:
    return event_stream_frame(event, json.dumps(payload).encode())


def exception(name: str, payload: dict[str, Any]) -> bytes:
    return event_stream_frame(name, json.dumps(payload).encode(), message_type="exception")


OK_BODY = b"".join(
    [
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}),
        frame("contentBlockStop", {"contentBlockIndex": 0}),
        frame("messageStop", {"stopReason": "end_turn"}),
        frame("metadata", {"usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}}),
    ]
)


@pytest.fixture(autouse=True)
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The machine's own AWS settings never leak into a test."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_BEARER_TOKEN_BEDROCK",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none-config"))
    monkeypatch.setattr(_aws, "_utcnow", lambda: CLOCK)


def run(
    context: Context | dict[str, Any],
    body: bytes | httpx.Response = OK_BODY,
    *,
    model: Model = CLAUDE,
    **opts: Any,
) -> tuple[list[httpx.Request], AssistantMessage]:
    response = (
        body
        if isinstance(body, httpx.Response)
        else httpx.Response(
            200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=body
        )
    )

    async def main() -> AssistantMessage:
        return await stream_core.complete(model, context, StreamOptions(max_retries=0, **opts))

    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.route().mock(return_value=response)
        import anyio

        message = anyio.run(main)
        return [c.request for c in route.calls], message


def hello() -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hi"}]}


# --- SigV4 ----------------------------------------------------------------------------------

VECTOR_TIME = datetime.datetime(2015, 8, 30, 12, 36, 0, tzinfo=datetime.UTC)
VECTOR_CREDS = _aws.Credentials("AKIDEXAMPLE", SECRET)


@pytest.mark.parametrize(
    ("method", "signature"),
    [
        ("GET", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("POST", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ],
)
def test_sigv4_matches_the_aws_test_suite(method: str, signature: str) -> None:
    """AWS's published get-vanilla / post-vanilla vectors."""
    request = httpx.Request(method, "https://example.amazonaws.com/")
    got = _aws.sign_request(
        request, VECTOR_CREDS, region="us-east-1", service="service", now=VECTOR_TIME
    )
    assert got == signature
    assert request.headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={signature}"
    )
    assert request.headers["x-amz-date"] == "20150830T123600Z"


def test_signed_request_from_env_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    (request,), message = run(hello())
    assert message.stop_reason == "stop" and message.text() == "ok"
    assert str(request.url) == (
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/"
        "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    )
    h = request.headers
    assert h["x-amz-date"] == "20260102T030405Z"
    assert h["x-amz-security-token"] == TOKEN
    auth = h["authorization"]
    assert auth.startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/eu-west-1/bedrock/aws4_request, "
        "SignedHeaders=host;x-amz-date;x-amz-security-token, Signature="
    )
    # The signature covers the exact bytes sent: re-signing them gives the same header.
    again = httpx.Request("POST", request.url, content=request.content)
    expected = _aws.sign_request(
        again,
        _aws.Credentials("AKIDEXAMPLE", SECRET, TOKEN),
        region="eu-west-1",
        service="bedrock",
        now=CLOCK,
    )
    assert auth.endswith(f"Signature={expected}")
    again = httpx.Request("POST", request.url, content=request.content + b" ")
    assert (
        _aws.sign_request(again, VECTOR_CREDS, region="eu-west-1", service="bedrock", now=CLOCK)
        != expected
    )


def test_profile_from_shared_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = nope\n\n"
        f"[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = {SECRET}\n"
    )
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = ap-southeast-2\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "work")
    (request,), message = run(hello())
    assert message.stop_reason == "stop"
    assert request.url.host == "bedrock-runtime.ap-southeast-2.amazonaws.com"
    assert (
        "Credential=AKIDWORK/20260102/ap-southeast-2/bedrock/" in request.headers["authorization"]
    )
    assert "x-amz-security-token" not in request.headers
    # An explicit profile and region in options win.
    (request,), _ = run(hello(), extra={"profile": "default", "region": "us-west-2"})
    assert "Credential=AKIDDEFAULT/20260102/us-west-2/" in request.headers["authorization"]


def test_static_keys_in_the_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(f"[default]\naws_access_key_id = AKIDCFG\naws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    (request,), _ = run(hello())
    assert "Credential=AKIDCFG/" in request.headers["authorization"]


def test_bearer_api_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-0123456789abcdef")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    (request,), message = run(hello())
    assert message.stop_reason == "stop"
    assert request.headers["authorization"] == "Bearer bedrock-api-key-0123456789abcdef"
    assert "x-amz-date" not in request.headers
    assert request.url.host == "bedrock-runtime.us-east-1.amazonaws.com"


def test_no_credentials_is_an_auth_event() -> None:
    requests, message = run(hello())
    assert requests == []
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "auth"
    assert "AWS_BEARER_TOKEN_BEDROCK" in message.error.message
    assert stream_core.api_key_env(CLAUDE) == ("AWS_BEARER_TOKEN_BEDROCK", False)


def test_secrets_never_reach_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    echo = httpx.Response(
        403,
        headers={"content-type": "application/json"},
        json={"message": f"The request signature we calculated does not match: {SECRET} {TOKEN}"},
    )
    (request,), message = run(hello(), echo)
    signature = request.headers["authorization"].rpartition("Signature=")[2]
    error = message.error
    assert error is not None and error.kind == "auth" and error.status_code == 403
    dumped = message.model_dump_json()
    for secret in (SECRET, TOKEN, signature):
        assert secret[:12] not in dumped
    assert "does not match" in error.message


def test_custom_endpoint_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    model = CLAUDE.model_copy(update={"base_url": "https://vpce-1.bedrock-runtime.example.test/"})
    (request,), _ = run(hello(), model=model, api_key="bedrock-api-key-0123456789abcdef")
    assert str(request.url) == (
        "https://vpce-1.bedrock-runtime.example.test/model/"
        "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    )


def test_every_catalog_model_gets_a_bedrock_url() -> None:
    models = [m for m in stream_core.list_models("amazon-bedrock") if m.api == API]
    assert models
    for model in models:
        url = httpx.URL(stream_core.providers.bedrock.endpoint(model, StreamOptions()))
        assert url.host == "bedrock-runtime.us-east-1.amazonaws.com"
        assert url.raw_path.startswith(b"/model/") and b":" not in url.raw_path


# --- request payload --------------------------------------------------------------------------


def mixed_context() -> Context:
    same: dict[str, Any] = {"api": API, "provider": CLAUDE.provider, "model": CLAUDE.id}
    other: dict[str, Any] = {"api": "openai-completions", "provider": "openai", "model": "gpt-x"}
    return Context(
        system_prompt="Be brief.",
        messages=[
            UserMessage(
                content=[
                    TextContent(text="What word is this?"),
                    ImageContent(data=IMAGE, mime_type="image/png"),
                    ImageContent(data=IMAGE, mime_type="image/tiff"),
                ]
            ),
            AssistantMessage(
                **other,
                content=[
                    ThinkingContent(thinking="Other model reasoning.", signature="gpt-sig"),
                    TextContent(text="Let me look."),
                    ToolCall(id="call|abc.def", name="lookup", arguments={"word": "x"}),
                ],
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id="call|abc.def",
                tool_name="lookup",
                content=[TextContent(text="a letter")],
                is_error=True,
            ),
            AssistantMessage(
                **same,
                content=[
                    ThinkingContent(thinking="Signed thoughts.", signature="claude-sig"),
                    ThinkingContent(thinking="", signature="claude-redacted", redacted=True),
                    ToolCall(id="tooluse_1", name="lookup", arguments={"word": "y"}),
                ],
                stop_reason="tool_use",
            ),
            UserMessage(content="Answer now."),
        ],
        tools=[TOOL],
    )


def payload_of(**opts: Any) -> dict[str, Any]:
    (request,), _ = run(mixed_context(), api_key="bedrock-api-key-0123456789abcdef", **opts)
    assert request.headers["content-type"] == "application/json"
    return dict(json.loads(request.content))


def test_payload_converts_a_mixed_history() -> None:
    payload = payload_of(tool_choice="required")
    assert "modelId" not in payload and "stream" not in payload
    assert payload["system"] == [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]
    assert payload["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "lookup",
                    "description": "Look a word up.",
                    "inputSchema": {"json": TOOL.parameters},
                }
            }
        ],
        "toolChoice": {"any": {}},
    }
    messages = payload["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == [
        {"text": "What word is this?"},
        {"image": {"format": "png", "source": {"bytes": IMAGE}}},
        {
            "text": "(image omitted: us.anthropic.claude-sonnet-4-5-20250929-v1:0 takes gif, "
            "jpeg, png, webp images, not image/tiff)"
        },
    ]
    # Another model's reasoning becomes text; its tool-call id is made acceptable.
    other = messages[1]["content"]
    assert other[0] == {"text": "Other model reasoning."}
    assert other[1] == {"text": "Let me look."}
    call_id = other[2]["toolUse"]["toolUseId"]
    assert call_id == "call_abc_def"
    assert other[2]["toolUse"] == {"toolUseId": call_id, "name": "lookup", "input": {"word": "x"}}
    assert messages[2]["content"] == [
        {
            "toolResult": {
                "toolUseId": call_id,
                "content": [{"text": "a letter"}],
                "status": "error",
            }
        }
    ]
    # The same model's signed and redacted reasoning goes back verbatim.
    assert messages[3]["content"][:2] == [
        {
            "reasoningContent": {
                "reasoningText": {"text": "Signed thoughts.", "signature": "claude-sig"}
            }
        },
        {"reasoningContent": {"redactedContent": "claude-redacted"}},
    ]
    # The unanswered call gets an error result, merged with the next prompt (turns alternate),
    # and the cache point closes the last user turn.
    last = messages[4]["content"]
    assert last[0]["toolResult"]["toolUseId"] == "tooluse_1"
    assert last[0]["toolResult"]["status"] == "error"
    assert last[1:] == [{"text": "Answer now."}, {"cachePoint": {"type": "default"}}]


def test_reasoning_config_for_claude() -> None:
    payload = payload_of(reasoning="low", temperature=0.5, max_tokens=1500)
    assert payload["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "anthropic_beta": ["interleaved-thinking-2025-05-14"],
    }
    # Room for the answer beyond the budget; no temperature with thinking.
    assert payload["inferenceConfig"] == {"maxTokens": 2048}


def test_no_reasoning_keeps_temperature_and_long_cache_has_a_ttl() -> None:
    payload = payload_of(temperature=0.5, max_tokens=100, cache_retention="long")
    assert payload["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.5}
    assert "additionalModelRequestFields" not in payload
    assert payload["system"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


def test_no_cache_points_when_off_or_unsupported() -> None:
    assert "cachePoint" not in json.dumps(payload_of(cache_retention="none"))
    llama = stream_core.get_model("amazon-bedrock", "meta.llama3-3-70b-instruct-v1:0")
    (request,), _ = run(mixed_context(), model=llama, api_key="bedrock-api-key-0123456789abcdef")
    sent = json.loads(request.content)
    assert "cachePoint" not in request.content.decode()
    # Text-only model: images become a note; non-Claude reasoning has no thinking config.
    assert {"text": "(image omitted: this model takes no images)"} in sent["messages"][0]["content"]


# --- stream shapes ------------------------------------------------------------------------------


def key(**opts: Any) -> dict[str, Any]:
    return {"api_key": "bedrock-api-key-0123456789abcdef", **opts}


def test_eof_after_message_stop_without_metadata_is_a_normal_end() -> None:
    body = b"".join(
        [
            frame("messageStart", {"role": "assistant"}),
            frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "done"}}),
            frame("contentBlockStop", {"contentBlockIndex": 0}),
            frame("messageStop", {"stopReason": "end_turn"}),
        ]
    )
    _, message = run(hello(), body, **key())
    assert message.stop_reason == "stop" and message.error is None
    assert message.text() == "done" and message.usage.total_tokens == 0


def test_metadata_before_any_stop_does_not_end_the_stream() -> None:
    body = b"".join(
        [
            frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "cut"}}),
            frame("metadata", {"usage": {"inputTokens": 3, "outputTokens": 1}}),
        ]
    )
    _, message = run(hello(), body, **key())
    assert message.error is not None and message.error.kind == "network"
    assert "messageStop" in message.error.message and message.usage.input == 3


def test_cache_usage_and_guardrail_stop() -> None:
    body = b"".join(
        [
            frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Sorry"}}),
            frame("messageStop", {"stopReason": "guardrail_intervened"}),
            frame(
                "metadata",
                {
                    "usage": {
                        "inputTokens": 10,
                        "outputTokens": 2,
                        "cacheReadInputTokens": 100,
                        "cacheWriteInputTokens": 50,
                        "totalTokens": 162,
                    }
                },
            ),
        ]
    )
    _, message = run(hello(), body, **key())
    assert message.stop_reason == "error" and message.raw_stop_reason == "guardrail_intervened"
    assert message.error is not None and message.error.kind == "content_filter"
    assert message.text() == "Sorry"
    u = message.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (10, 2, 100, 50, 162)


@pytest.mark.parametrize(
    ("name", "payload", "kind", "retryable", "text"),
    [
        ("throttlingException", {"message": "slow down"}, "rate_limit", True, "slow down"),
        ("serviceUnavailableException", {"message": "busy"}, "overloaded", True, "busy"),
        (
            "modelStreamErrorException",
            {"message": "model failed", "originalStatusCode": 500, "originalMessage": "boom"},
            "server",
            True,
            "boom",
        ),
        ("internalServerException", {}, "server", True, "internalServerException"),
        (
            "validationException",
            {"message": "Input is too long for requested model."},
            "context_overflow",
            False,
            "too long",
        ),
        ("someFutureException", {"message": "new"}, "server", True, "new"),
    ],
)
def test_exception_frames_map_to_error_kinds(
    name: str, payload: dict[str, Any], kind: str, retryable: bool, text: str
) -> None:
    body = (
        frame("messageStart", {"role": "assistant"})
        + frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "par"}})
        + exception(name, payload)
    )
    _, message = run(hello(), body, **key())
    error = message.error
    assert message.stop_reason == "error" and error is not None
    assert (error.kind, error.retryable) == (kind, retryable)
    assert text in error.message and message.text() == "par"


def test_redacted_and_signed_reasoning_and_interleaved_tool_call() -> None:
    body = b"".join(
        [
            frame(
                "contentBlockDelta",
                {
                    "contentBlockIndex": 0,
                    "delta": {"reasoningContent": {"redactedContent": "QUJD"}},
                },
            ),
            frame("contentBlockStop", {"contentBlockIndex": 0}),
            frame(
                "contentBlockDelta",
                {"contentBlockIndex": 1, "delta": {"reasoningContent": {"text": "hmm"}}},
            ),
            frame(
                "contentBlockDelta",
                {"contentBlockIndex": 1, "delta": {"reasoningContent": {"signature": "sig"}}},
            ),
            frame("contentBlockStop", {"contentBlockIndex": 1}),
            frame(
                "contentBlockStart",
                {
                    "contentBlockIndex": 2,
                    "start": {"toolUse": {"toolUseId": "tooluse_a", "name": "lookup"}},
                },
            ),
            frame(
                "contentBlockDelta",
                {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"word":'}}},
            ),
            frame(
                "contentBlockDelta",
                {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '"z"}'}}},
            ),
            frame("contentBlockStop", {"contentBlockIndex": 2}),
            frame("messageStop", {"stopReason": "end_turn"}),
            frame("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1}}),
        ]
    )
    _, message = run(hello(), body, **key())
    redacted, thinking, call = message.content
    assert isinstance(redacted, ThinkingContent) and redacted.redacted
    assert redacted.signature == "QUJD" and redacted.thinking == ""
    assert isinstance(thinking, ThinkingContent) and not thinking.redacted
    assert (thinking.thinking, thinking.signature) == ("hmm", "sig")
    assert isinstance(call, ToolCall) and call.arguments == {"word": "z"}
    # end_turn with a complete call is tool_use (CONTRACT 3.1).
    assert message.stop_reason == "tool_use" and message.raw_stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("event", "payload", "field"),
    [
        (
            "contentBlockDelta",
            {"contentBlockIndex": "0", "delta": {"text": "x"}},
            "contentBlockIndex",
        ),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": 5}}, "delta.text"),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": []}, "delta"),
        ("messageStop", {"stopReason": ["end_turn"]}, "stopReason"),
        ("metadata", {"usage": {"inputTokens": 1.5}}, "inputTokens"),
        ("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": 1}}, "toolUse"),
    ],
)
def test_wrong_json_types_end_protocol_naming_the_field(
    event: str, payload: dict[str, Any], field: str
) -> None:
    body = frame("messageStart", {"role": "assistant"}) + frame(event, payload)
    _, message = run(hello(), body, **key())
    error = message.error
    assert error is not None and error.kind == "protocol"
    assert event in error.message and field in error.message


def test_a_corrupt_frame_mid_stream_is_protocol_keeping_content() -> None:
    good = frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "kept"}})
    bad = bytearray(frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}))
    bad[-1] ^= 0xFF
    _, message = run(hello(), good + bytes(bad) + OK_BODY, **key())
    assert message.error is not None and message.error.kind == "protocol"
    assert "CRC" in message.error.message and message.text() == "kept"


def test_non_streamed_converse_answer_is_read_whole() -> None:
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "think", "signature": "s"}}},
                    {"text": "Here."},
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_b",
                            "name": "lookup",
                            "input": {"word": "q"},
                        }
                    },
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12},
    }
    response = httpx.Response(200, headers={"content-type": "application/json"}, json=answer)
    _, message = run(hello(), response, **key())
    thinking, text, call = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.signature == "s"
    assert isinstance(text, TextContent) and text.text == "Here."
    assert isinstance(call, ToolCall) and call.id == "tooluse_b" and call.arguments == {"word": "q"}
    assert message.stop_reason == "tool_use" and message.usage.total_tokens == 12


def test_a_web_page_is_named_not_taken_for_a_corrupt_frame() -> None:
    page = httpx.Response(
        200, headers={"content-type": "text/html"}, content=b"<html><body>Sign in</body></html>"
    )
    _, message = run(hello(), page, **key())
    error = message.error
    assert error is not None and error.kind == "protocol"
    assert "text/html" in error.message and "Sign in" in error.message


def test_a_mislabelled_event_stream_is_still_read() -> None:
    body = httpx.Response(
        200, headers={"content-type": "application/octet-stream"}, content=OK_BODY
    )
    _, message = run(hello(), body, **key())
    assert message.stop_reason == "stop" and message.text() == "ok"
