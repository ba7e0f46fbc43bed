"""The Gemini provider (Gemini API and Vertex AI): what it sends, and the stream shapes the
recordings do not show (a blocked prompt, a malformed call, error chunks, several calls in
one chunk, streamed arguments, the non-streamed answer)."""

from __future__ import annotations

import base64
import json
import sys
import types
from collections import deque
from typing import Any

import anyio
import httpx
import pytest
import respx
from hypothesis import given, settings
from hypothesis import strategies as st

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    MessageUpdate,
    Model,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import Run, options, run_provider, sse_response
from stream_core.provider import Assembler, StreamFailure
from stream_core.providers import google

API = "google-generative-ai"


def _chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    obj = {"candidates": [candidate], "responseId": "resp-1", **extra}
    return f"data: {json.dumps(obj)}\r\n\r\n".encode()


def _data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _usage(prompt: int, out: int, **more: int) -> dict[str, Any]:
    return {"usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": out, **more}}


def _run(*chunks: bytes, **opts: Any) -> Run:
    async def main() -> Run:
        return await run_provider(API, [sse_response([b"".join(chunks)])], opts=options(**opts))

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


# --- translator -------------------------------------------------------------------------


def test_blocked_prompt_is_content_filter_with_the_reason() -> None:
    run = _run(
        _data(
            {
                "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
            }
        )
    )
    m = run.message
    assert m.stop_reason == "error" and m.raw_stop_reason == "PROHIBITED_CONTENT"
    assert m.error is not None and m.error.kind == "content_filter"
    assert "PROHIBITED_CONTENT" in m.error.message
    assert m.content == [] and m.usage.input == 12


def test_malformed_function_call_ends_protocol_keeping_text_and_vendor_words() -> None:
    run = _run(
        _chunk({"text": "Calling it now."}),
        _chunk(
            finish="MALFORMED_FUNCTION_CALL",
            **_usage(5, 7),
        ).replace(
            b'"finishReason"', b'"finishMessage": "Malformed function call: print(", "finishReason"'
        ),
    )
    m = run.message
    assert m.stop_reason == "error" and m.raw_stop_reason == "MALFORMED_FUNCTION_CALL"
    assert m.error is not None and m.error.kind == "protocol"
    assert "Malformed function call: print(" in m.error.message
    assert m.text() == "Calling it now."
    assert m.usage.output == 7


def test_unknown_finish_reason_is_stop_with_the_raw_value() -> None:
    run = _run(_chunk({"text": "hi"}, finish="SOMETHING_NEW"))
    assert run.message.stop_reason == "stop"
    assert run.message.raw_stop_reason == "SOMETHING_NEW"


def test_error_chunk_gets_the_kind_of_its_status_and_is_retried_before_content() -> None:
    error = _data(
        {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    )
    ok = _chunk({"text": "fine"}, finish="STOP")

    async def main() -> Run:
        return await run_provider(
            API, [sse_response([error]), sse_response([ok])], opts=options(max_retries=1)
        )

    run = anyio.run(main)
    assert run.calls == 2 and run.message.text() == "fine"

    run = _run(error)
    e = run.message.error
    assert e is not None and e.kind == "rate_limit" and e.retryable
    assert "Quota exceeded" in e.message


def test_error_chunk_after_text_keeps_the_text_and_is_not_retried() -> None:
    run = _run(
        _chunk({"text": "partial "}),
        _data(
            {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
        ),
        max_retries=2,
    )
    assert run.calls == 1
    assert run.message.error is not None and run.message.error.kind == "overloaded"
    assert run.message.text() == "partial "


def test_several_calls_in_one_chunk_with_and_without_vendor_ids() -> None:
    run = _run(
        _chunk({"thought": True, "text": "Plan.", "thoughtSignature": "c2lnLXQ="}),
        _chunk(
            {
                "functionCall": {"name": "a", "args": {"x": 1}, "id": "fc-1"},
                "thoughtSignature": "c2ln",
            },
            {"functionCall": {"name": "b", "args": {}}},
            {"functionCall": {"name": "c"}},
            finish="STOP",
            **_usage(3, 4, thoughtsTokenCount=2),
        ),
    )
    m = run.message
    assert m.stop_reason == "tool_use"
    thinking, *calls = m.content
    assert isinstance(thinking, ThinkingContent) and thinking.signature == "c2lnLXQ="
    assert [c.name for c in calls if isinstance(c, ToolCall)] == ["a", "b", "c"]
    a, b, c = (x for x in calls if isinstance(x, ToolCall))
    assert a.id == "fc-1" and a.arguments == {"x": 1} and a.thought_signature == "c2ln"
    assert b.arguments == {} and c.arguments == {}
    assert len({a.id, b.id, c.id}) == 3 and all(x.id for x in (a, b, c))
    assert m.usage.output == 6 and m.usage.reasoning == 2
    # Each call streams start, one delta, end, back to back.
    deltas = [e.delta for e in run.events if isinstance(e, MessageUpdate)]
    kinds = [d.type for d in deltas if d.content_index > 0]
    assert kinds == ["toolcall_start", "toolcall_delta", "toolcall_end"] * 3


def test_text_signature_and_trailing_signature_part() -> None:
    run = _run(
        _chunk({"text": "Hello"}),
        _chunk({"text": " world"}),
        _chunk({"text": "", "thoughtSignature": "dHh0"}, finish="STOP"),
    )
    (block,) = run.message.content
    assert isinstance(block, TextContent)
    assert block.text == "Hello world" and block.text_signature == "dHh0"


def test_streamed_arguments_are_written_as_json_as_they_come() -> None:
    """Vertex `partialArgs`: nested paths, all value kinds, a string in escaped pieces."""
    pieces = [
        {"jsonPath": "$.q", "stringValue": 'say "hi', "willContinue": True},
        {"jsonPath": "$.q", "stringValue": '"\n\u00e9'},
        {"jsonPath": "$.opts.n", "numberValue": 3},
        {"jsonPath": "$.opts.deep[0].on", "boolValue": True},
        {"jsonPath": "$.opts.deep[1].on", "boolValue": False},
        {"jsonPath": "$.opts['odd key']", "nullValue": None},
        {"jsonPath": "$.list[0]", "numberValue": 1.5},
        {"jsonPath": "$.list[1]", "stringValue": "x"},
    ]
    chunks = [_chunk({"functionCall": {"name": "f", "willContinue": True}})]
    chunks += [_chunk({"functionCall": {"partialArgs": [p], "willContinue": True}}) for p in pieces]
    chunks.append(_chunk({"functionCall": {}}, finish="STOP"))
    run = _run(*chunks)
    (call,) = run.message.content
    assert isinstance(call, ToolCall) and not call.truncated
    want = {
        "q": 'say "hi"\n\u00e9',
        "opts": {"n": 3, "deep": [{"on": True}, {"on": False}], "odd key": None},
        "list": [1.5, "x"],
    }
    assert call.arguments == want
    streamed = "".join(
        e.delta.delta
        for e in run.events
        if isinstance(e, MessageUpdate) and isinstance(e.delta, ToolCallDelta)
    )
    assert json.loads(streamed) == want
    assert run.message.stop_reason == "tool_use"


def test_streamed_call_cut_by_the_stream_end_is_truncated() -> None:
    run = _run(
        _chunk({"functionCall": {"name": "f", "willContinue": True}}),
        _chunk(
            {
                "functionCall": {
                    "partialArgs": [{"jsonPath": "$.a", "stringValue": "x", "willContinue": True}],
                    "willContinue": True,
                }
            },
            finish="MAX_TOKENS",
        ),
    )
    (call,) = run.message.content
    assert isinstance(call, ToolCall) and call.truncated
    assert run.message.stop_reason == "length"


def test_usage_subtracts_cache_and_counts_tool_prompt_as_input() -> None:
    run = _run(
        _chunk(
            {"text": "ok"},
            finish="STOP",
            usageMetadata={
                "promptTokenCount": 100,
                "cachedContentTokenCount": 60,
                "toolUsePromptTokenCount": 7,
                "candidatesTokenCount": 5,
                "thoughtsTokenCount": 3,
                "totalTokenCount": 115,
            },
        )
    )
    u = run.message.usage
    assert (u.input, u.cache_read, u.output, u.reasoning) == (47, 60, 8, 3)
    assert u.total_tokens == 115


@pytest.mark.parametrize(
    "bad",
    [
        {"candidates": [{"content": {"parts": [{"text": 5}]}}]},
        {"candidates": [{"finishReason": ["STOP"]}]},
        {"candidates": "nope"},
        {"usageMetadata": {"promptTokenCount": "12"}},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]}}]},
    ],
)
def test_values_of_the_wrong_type_end_protocol(bad: dict[str, Any]) -> None:
    run = _run(_chunk({"text": "kept"}), _data(bad))
    assert run.message.error is not None and run.message.error.kind == "protocol"
    assert run.message.text() == "kept"


def test_non_streamed_answer_is_read_whole() -> None:
    answer = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "Sure."}, {"functionCall": {"name": "f", "args": {"a": 1}}}],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 6},
        "responseId": "r-9",
    }
    for body in (answer, [answer]):  # generateContent, or streamGenerateContent without alt=sse

        async def main(body: Any = body) -> Run:
            response = httpx.Response(
                200, headers={"content-type": "application/json"}, content=json.dumps(body).encode()
            )
            return await run_provider(API, [response])

        run = anyio.run(main)
        assert_valid_event_stream(run.events)
        m = run.message
        assert m.stop_reason == "tool_use" and m.response_id == "r-9"
        assert m.text() == "Sure." and m.tool_calls()[0].arguments == {"a": 1}
        assert m.usage.input == 4 and m.usage.output == 6


# --- request ----------------------------------------------------------------------------

IMAGE = base64.b64encode(b"\x89PNG not really").decode()
OK = _chunk({"text": "ok"}, finish="STOP")


def _model(id: str = "gemini-2.5-flash", **kw: Any) -> Model:
    fields: dict[str, Any] = {
        "id": id,
        "api": API,
        "provider": "google",
        "base_url": "https://generativelanguage.googleapis.com/v1beta",
        "reasoning": True,
        "input": ["text", "image"],
        **kw,
    }
    return Model(**fields)


def _send(model: Model, context: Context, **opts: Any) -> tuple[httpx.Request, AssistantMessage]:
    async def main() -> tuple[httpx.Request, AssistantMessage]:
        with respx.mock(assert_all_mocked=True) as mock:
            route = mock.route().mock(return_value=sse_response([OK]))
            message = await stream_core.stream(model, context, options(**opts)).result()
            return route.calls[0].request, message

    return anyio.run(main)


def _history(target: Model) -> Context:
    other = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-x"}
    same = {"api": API, "provider": target.provider, "model": target.id}
    return Context(
        system_prompt="Be brief.",
        messages=[
            UserMessage(
                content=[TextContent(text="Look:"), ImageContent(data=IMAGE, mime_type="image/png")]
            ),
            AssistantMessage(
                **other,
                content=[
                    ThinkingContent(thinking="their reasoning", signature="anthropic-sig"),
                    TextContent(text="Two calls.", text_signature="msg_1"),
                    ToolCall(id="toolu_1", name="zoom", arguments={"factor": 2}),
                    ToolCall(id="toolu_2", name="zoom", arguments={"factor": 3}),
                ],
            ),
            ToolResultMessage(
                tool_call_id="toolu_2", tool_name="zoom", content=[TextContent(text="second")]
            ),
            ToolResultMessage(
                tool_call_id="toolu_1",
                tool_name="zoom",
                content=[ImageContent(data=IMAGE, mime_type="image/png")],
                is_error=True,
            ),
            AssistantMessage(
                **same,
                content=[
                    ThinkingContent(thinking="my reasoning", signature="bXk="),
                    TextContent(text="Done.", text_signature="ZG9uZQ=="),
                    ToolCall(id="g1", name="zoom", arguments={}, thought_signature="Y2FsbA=="),
                ],
            ),
            ToolResultMessage(tool_call_id="g1", tool_name="zoom", content=[]),
            UserMessage(content="Thanks"),
        ],
        tools=[
            Tool(
                name="zoom",
                description="Zoom in.",
                parameters={
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {"factor": {"type": "number", "exclusiveMinimum": 0}},
                    "required": ["factor"],
                    "additionalProperties": False,
                },
            )
        ],
    )


def test_request_payload_url_and_key_header() -> None:
    model = _model()
    request, message = _send(model, _history(model), reasoning="low", max_tokens=500)
    assert message.stop_reason == "stop"
    assert str(request.url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert request.headers["x-goog-api-key"] == options().api_key
    assert "key=" not in str(request.url)
    body = json.loads(request.content)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {
        "maxOutputTokens": 500,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
    }
    assert body["tools"][0]["functionDeclarations"][0]["parameters"] == {
        "type": "object",
        "properties": {"factor": {"type": "number"}},
        "required": ["factor"],
    }
    # Consecutive user turns are merged (roles alternate): responses first, then images.
    roles = [c["role"] for c in body["contents"]]
    assert roles == ["user", "model", "user", "model", "user"]
    first, theirs, results_and_images, mine, last_and_thanks = body["contents"]
    n = sum(1 for p in results_and_images["parts"] if "functionResponse" in p)
    results = {"parts": results_and_images["parts"][:n]}
    images = {"parts": results_and_images["parts"][n:]}
    last_result = {"parts": last_and_thanks["parts"][:1]}
    thanks = {"parts": last_and_thanks["parts"][1:]}
    assert first["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": IMAGE}}
    # Another vendor's turn: reasoning as plain text, no signatures or ids.
    assert theirs["parts"] == [
        {"text": "their reasoning"},
        {"text": "Two calls."},
        {"functionCall": {"name": "zoom", "args": {"factor": 2}}},
        {"functionCall": {"name": "zoom", "args": {"factor": 3}}},
    ]
    # Both responses in one user turn, in call order, whatever order they were recorded in.
    responses = [p["functionResponse"] for p in results["parts"]]
    assert [r["response"] for r in responses] == [
        {"error": "(see attached image)"},
        {"output": "second"},
    ]
    # The same model's turn goes back with its signatures.
    assert mine["parts"] == [
        {"thought": True, "text": "my reasoning", "thoughtSignature": "bXk="},
        {"text": "Done.", "thoughtSignature": "ZG9uZQ=="},
        {"functionCall": {"name": "zoom", "args": {}}, "thoughtSignature": "Y2FsbA=="},
    ]
    # A model that cannot nest images in a function response gets them in a user turn.
    assert images["parts"] == [
        {"text": "Tool result image:"},
        {"inlineData": {"mimeType": "image/png", "data": IMAGE}},
    ]
    assert last_result["parts"][0]["functionResponse"]["response"] == {"output": "(no output)"}
    assert thanks["parts"] == [{"text": "Thanks"}]


def test_gemini_3_takes_a_thinking_level_nested_images_and_placeholder_signatures() -> None:
    model = _model("gemini-3-pro-preview")
    request, _ = _send(model, _history(model), reasoning="medium")
    body = json.loads(request.content)
    assert body["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingLevel": "high",
    }
    theirs = body["contents"][1]["parts"]
    assert theirs[2]["thoughtSignature"] == "skip_thought_signature_validator"
    results = body["contents"][2]["parts"]
    assert results[0]["functionResponse"]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": IMAGE}}
    ]
    assert not any(c["parts"][0].get("text") == "Tool result image:" for c in body["contents"])


def test_tool_choice_and_temperature() -> None:
    model = _model(reasoning=False)
    ctx = _history(model)
    request, _ = _send(model, ctx, temperature=0.2, tool_choice="required")
    body = json.loads(request.content)
    assert body["generationConfig"] == {"temperature": 0.2}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


def test_clean_schema_keeps_what_gemini_takes() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Pt": {"type": "object", "properties": {"x": {"type": "integer", "format": "int64"}}}
        },
        "properties": {
            "p": {"$ref": "#/$defs/Pt"},
            "maybe": {"type": ["string", "null"], "format": "email", "const": "a"},
            "either": {"oneOf": [{"type": "string"}, {"type": "null"}]},
            "many": {"anyOf": [{"type": "string"}, {"type": "integer", "enum": [1, 2]}]},
            "loop": {"$ref": "#/$defs/Missing"},
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "uniqueItems": True,
            },
        },
        "required": ["p", "ghost"],
        "patternProperties": {"^x": {}},
    }
    assert google.clean_schema(schema) == {
        "type": "object",
        "properties": {
            "p": {"type": "object", "properties": {"x": {"type": "integer", "format": "int64"}}},
            "maybe": {"type": "string", "nullable": True, "enum": ["a"]},
            "either": {"nullable": True, "type": "string"},
            "many": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "loop": {"type": "object"},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
        "required": ["p"],
    }


def test_key_from_gemini_api_key_then_google_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-google-key-123")
    request, _ = _send(model, Context(messages=[UserMessage(content="hi")]), api_key=None)
    assert request.headers["x-goog-api-key"] == "AIza-google-key-123"
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-gemini-key-456")
    request, _ = _send(model, Context(messages=[UserMessage(content="hi")]), api_key=None)
    assert request.headers["x-goog-api-key"] == "AIza-gemini-key-456"


# --- Vertex AI --------------------------------------------------------------------------


def _vertex(**compat: Any) -> Model:
    return _model(
        "gemini-2.5-pro", provider="google-vertex", base_url=google.VERTEX_BASE_URL, compat=compat
    )


def _fake_google_auth(monkeypatch: pytest.MonkeyPatch, token: str, calls: list[str]) -> None:
    """A stand-in for google-auth: ADC that hands out `token` without any network."""

    class Credentials:
        token: str | None = None

        def refresh(self, request: object) -> None:
            calls.append("refresh")
            self.token = token

    auth = types.ModuleType("google.auth")

    def default(scopes: list[str]) -> tuple[Credentials, str]:
        calls.append("default")
        return Credentials(), "adc-project"

    auth.default = default  # type: ignore[attr-defined]
    transport = types.ModuleType("google.auth.transport")
    requests = types.ModuleType("google.auth.transport.requests")
    requests.Request = object  # type: ignore[attr-defined]
    pkg = types.ModuleType("google")
    pkg.auth = auth  # type: ignore[attr-defined]
    auth.transport = transport  # type: ignore[attr-defined]
    transport.requests = requests  # type: ignore[attr-defined]
    for name, module in {
        "google": pkg,
        "google.auth": auth,
        "google.auth.transport": transport,
        "google.auth.transport.requests": requests,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_vertex_uses_project_location_and_an_adc_token(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "ya29.vertex-token-abcdefghijklmnop"
    calls: list[str] = []
    _fake_google_auth(monkeypatch, token, calls)
    monkeypatch.delenv("GOOGLE_CLOUD_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    request, message = _send(_vertex(), Context(messages=[UserMessage(content="hi")]), api_key=None)
    assert message.stop_reason == "stop"
    assert str(request.url) == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/my-proj/locations/"
        "europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert request.headers["authorization"] == f"Bearer {token}"
    assert "x-goog-api-key" not in request.headers
    assert calls == ["default", "refresh"]


def test_vertex_token_is_redacted_from_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "ya29.vertex-token-abcdefghijklmnop"
    _fake_google_auth(monkeypatch, token, [])
    monkeypatch.delenv("GOOGLE_CLOUD_API_KEY", raising=False)
    model = _vertex(project="p", location="global")
    body = json.dumps(
        {"error": {"code": 401, "message": f"bad token {token}", "status": "UNAUTHENTICATED"}}
    )

    async def main() -> AssistantMessage:
        with respx.mock() as mock:
            route = mock.route().mock(
                return_value=httpx.Response(
                    401, content=body.encode(), headers={"content-type": "application/json"}
                )
            )
            s = stream_core.stream(
                model, {"messages": [{"role": "user", "content": "hi"}]}, options(api_key=None)
            )
            message = await s.result()
            assert str(route.calls[0].request.url).startswith(
                "https://aiplatform.googleapis.com/v1/projects/p/locations/global/"
            )
            return message

    message = anyio.run(main)
    assert message.error is not None and message.error.kind == "auth"
    assert token not in message.model_dump_json()


def test_vertex_express_key_and_missing_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("GCLOUD_PROJECT", raising=False)
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "AIza-express-key-0001")
    request, _ = _send(_vertex(), Context(messages=[UserMessage(content="hi")]), api_key=None)
    assert str(request.url).startswith(
        "https://aiplatform.googleapis.com/v1/publishers/google/models/"
    )
    assert request.headers["x-goog-api-key"] == "AIza-express-key-0001"
    assert "authorization" not in request.headers

    # No key, no project: the template cannot be filled, so the call raises naming what to
    # set (issue 23: a template is filled or refused at `stream()`, never sent).
    monkeypatch.delenv("GOOGLE_CLOUD_API_KEY")
    with pytest.raises(ValueError, match="GOOGLE_CLOUD_PROJECT"):
        stream_core.stream(_vertex(), {"messages": [{"role": "user", "content": "hi"}]})


def test_a_streamed_call_repeating_its_name_is_one_call_and_a_new_name_is_another() -> None:
    piece = {"jsonPath": "$.a", "numberValue": 1}
    run = _run(
        _chunk({"functionCall": {"name": "f", "willContinue": True}}),
        _chunk({"functionCall": {"name": "f", "partialArgs": [piece], "willContinue": True}}),
        # No closing part before the next call (a vendor quirk): the open call ends here.
        _chunk({"functionCall": {"name": "g", "willContinue": True}}),
        _chunk({"functionCall": {"partialArgs": [piece]}}, finish="STOP"),
    )
    calls = run.message.tool_calls()
    assert [(c.name, c.arguments, c.truncated) for c in calls] == [
        ("f", {"a": 1}, False),
        ("g", {"a": 1}, False),
    ]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_PATHS = [
    ("responseId",),
    ("candidates",),
    ("candidates", 0),
    ("candidates", 0, "content"),
    ("candidates", 0, "content", "parts"),
    ("candidates", 0, "content", "parts", 0),
    ("candidates", 0, "content", "parts", 0, "text"),
    ("candidates", 0, "content", "parts", 0, "thought"),
    ("candidates", 0, "content", "parts", 1, "functionCall"),
    ("candidates", 0, "content", "parts", 1, "functionCall", "args"),
    ("candidates", 0, "content", "parts", 1, "functionCall", "partialArgs"),
    ("candidates", 0, "content", "parts", 1, "thoughtSignature"),
    ("candidates", 0, "finishReason"),
    ("usageMetadata",),
    ("usageMetadata", "promptTokenCount"),
    ("promptFeedback",),
    ("error",),
]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.sampled_from(_PATHS), _JSON)
def test_any_json_in_any_field_fails_typed_and_leaves_a_valid_message(
    path: tuple[Any, ...], value: Any
) -> None:
    """Straight through the translator (the stream adds nothing here, and is slower): a
    value of any type fails as a StreamFailure naming the field, never another exception,
    and the message still validates."""
    obj: dict[str, Any] = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "hi", "thought": False},
                        {
                            "functionCall": {"name": "f", "args": {"a": 1}},
                            "thoughtSignature": "c2ln",
                        },
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2},
        "responseId": "r",
    }
    target: Any = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    message = AssistantMessage(api=API, provider="p", model="m")
    asm = Assembler(message, _model(), google.WIRE.stop_reasons, deque())
    translate = google.WIRE.translator(asm)
    error = None
    try:
        translate("", json.dumps({"candidates": [{"content": {"parts": [{"text": "first "}]}}]}))
        translate("", json.dumps(obj))
    except StreamFailure as failure:
        error = failure.error
    asm.finalize(error)
    AssistantMessage.model_validate_json(message.model_dump_json())
