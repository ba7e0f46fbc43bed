"""2xx answers that are not the stream we asked for, and what errors say (issue 6, section 2).

A proxy that ignores `stream: true` (LiteLLM's `/v1/messages` does) answers with the
vendor's whole JSON message: it must give the same events and message as the same answer
streamed in one piece. Anything else with a 2xx ends `protocol` at once, without retries.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_core import (
    AssistantMessage,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    is_context_overflow,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    Run,
    contract_model,
    options,
    run_provider,
    sse_response,
)
from stream_core.provider import Assembler, StreamFailure, get_provider

ANTHROPIC = "anthropic-messages"
OPENAI = "openai-completions"


def _json_response(body: Any, status: int = 200, content_type: str = "application/json"):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(status, headers={"content-type": content_type}, content=raw)


def _run(api: str, *responses: httpx.Response | Exception, **opts: Any) -> Run:
    async def main() -> Run:
        with anyio.fail_after(20):  # a guard against hangs, not a timing assertion
            return await run_provider(api, list(responses), opts=options(**opts))

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


def _shape(run: Run) -> list[tuple[str, int, str]]:
    """The update events as (delta type, content index, delta text): what a consumer sees."""
    return [
        (e.delta.type, e.delta.content_index, getattr(e.delta, "delta", ""))
        for e in run.events
        if isinstance(e, MessageUpdate)
    ]


def _final(run: Run) -> dict[str, Any]:
    return run.message.model_dump(mode="json", exclude={"timestamp", "ttft_ms", "duration_ms"})


def _error(run: Run) -> StreamError:
    assert run.message.stop_reason == "error", run.message
    assert run.message.error is not None
    return run.message.error


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


# --- Anthropic's whole message ----------------------------------------------------------

ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_whole_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "Check the weather first.", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "opaque-blob"},
        {"type": "text", "text": "Let me look."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_2", "name": "clock", "input": {}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 30,
        "output_tokens": 45,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
    },
}


def _anthropic_streamed_in_one_piece(message: dict[str, Any]) -> bytes:
    start = {k: v for k, v in message.items() if k not in ("content", "stop_reason")}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**start, "content": []}})
    ]
    for i, block in enumerate(message["content"]):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": block},
            )
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"]},
                "usage": message["usage"],
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return _sse(events)


def test_anthropic_whole_json_answer_reads_like_the_same_answer_streamed() -> None:
    """If this fails: a proxy that ignores `stream: true` gives an empty message, or the
    request is sent again."""
    whole = _run(ANTHROPIC, _json_response(ANTHROPIC_MESSAGE), max_retries=2)
    streamed = _run(ANTHROPIC, sse_response([_anthropic_streamed_in_one_piece(ANTHROPIC_MESSAGE)]))

    assert whole.calls == 1
    assert whole.message.error is None and whole.message.stop_reason == "tool_use"
    assert _shape(whole) == _shape(streamed)
    assert _final(whole) == _final(streamed)
    content = whole.message.content
    assert isinstance(content[0], ThinkingContent) and content[0].signature == "sig-abc"
    assert isinstance(content[1], ThinkingContent) and content[1].redacted
    assert content[1].signature == "opaque-blob"
    assert isinstance(content[2], TextContent) and content[2].text == "Let me look."
    calls = whole.message.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("toolu_1", "weather", {"city": "Oslo"}),
        ("toolu_2", "clock", {}),
    ]
    # The server tool blocks are kept, as when streamed.
    assert [b.type for b in content].count("server_tool_call") == 1
    assert [b.type for b in content].count("server_tool_result") == 1
    assert len(content) == 7
    usage = whole.message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (30, 45, 100, 7)
    assert whole.message.response_id == "msg_whole_1"
    assert whole.message.raw_stop_reason == "tool_use"


def test_anthropic_whole_answer_cut_by_max_tokens_is_length() -> None:
    message = {
        **ANTHROPIC_MESSAGE,
        "content": [{"type": "text", "text": "The answer is"}],
        "stop_reason": "max_tokens",
    }
    run = _run(ANTHROPIC, _json_response(message))
    assert run.message.stop_reason == "length" and run.message.text() == "The answer is"


def test_anthropic_whole_answer_accepts_a_json_content_type_with_parameters() -> None:
    run = _run(
        ANTHROPIC,
        _json_response(ANTHROPIC_MESSAGE, content_type="application/json; charset=utf-8"),
    )
    assert run.message.stop_reason == "tool_use" and run.message.text() == "Let me look."


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "overloaded",
        ),
        (
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long: 9 > 8"},
            },
            "context_overflow",
        ),
        ({"error": {"type": "authentication_error", "message": "bad key"}}, "auth"),
    ],
)
def test_anthropic_error_object_with_200_gets_the_in_stream_kind(body: Any, kind: str) -> None:
    """If this fails: an error the proxy returned with 200 reads as an empty answer."""
    whole = _run(ANTHROPIC, _json_response(body))
    streamed = _run(ANTHROPIC, sse_response([_sse([("error", body)])]))
    assert _error(whole).kind == kind == _error(streamed).kind
    assert whole.message.content == []


def test_anthropic_whole_answer_of_the_wrong_shape_is_protocol() -> None:
    run = _run(ANTHROPIC, _json_response({**ANTHROPIC_MESSAGE, "content": "hello"}), max_retries=2)
    error = _error(run)
    assert error.kind == "protocol" and "content" in error.message
    assert run.calls == 1


# --- OpenAI-compatible whole completion -------------------------------------------------

OPENAI_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-whole-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-x",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Checking both.",
                "reasoning_content": "Two lookups are needed.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    },
                    # A server that sends no ids: each call still gets its own.
                    {"type": "function", "function": {"name": "clock", "arguments": "{}"}},
                    {"type": "function", "function": {"name": "date", "arguments": ""}},
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 120,
        "completion_tokens": 40,
        "total_tokens": 160,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 10},
    },
}


def _openai_streamed_in_one_piece(completion: dict[str, Any]) -> bytes:
    choice = completion["choices"][0]
    message = dict(choice["message"])
    message["tool_calls"] = [{**tc, "index": i} for i, tc in enumerate(message["tool_calls"])]
    chunks = [
        {
            "id": completion["id"],
            "object": "chat.completion.chunk",
            "model": completion["model"],
            "choices": [{"index": 0, "delta": message, "finish_reason": choice["finish_reason"]}],
        },
        {
            "id": completion["id"],
            "object": "chat.completion.chunk",
            "model": completion["model"],
            "choices": [],
            "usage": completion["usage"],
        },
    ]
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


def test_openai_whole_completion_reads_like_the_same_answer_streamed() -> None:
    """If this fails: LiteLLM or a local server answering without streaming gives an empty
    message and three requests."""
    whole = _run(OPENAI, _json_response(OPENAI_COMPLETION), max_retries=2)
    streamed = _run(OPENAI, sse_response([_openai_streamed_in_one_piece(OPENAI_COMPLETION)]))

    assert whole.calls == 1
    assert whole.message.error is None and whole.message.stop_reason == "tool_use"
    # Generated ids come from the response id, so the two runs agree on them too.
    assert _shape(whole) == _shape(streamed)
    assert _final(whole) == _final(streamed)
    content = whole.message.content
    assert (
        isinstance(content[0], ThinkingContent) and content[0].thinking == "Two lookups are needed."
    )
    assert isinstance(content[1], TextContent) and content[1].text == "Checking both."
    calls = whole.message.tool_calls()
    assert [(c.name, c.arguments) for c in calls] == [
        ("weather", {"city": "Oslo"}),
        ("clock", {}),
        ("date", {}),
    ]
    ids = [c.id for c in calls]
    assert ids[0] == "call_a" and all(ids) and len(set(ids)) == 3
    usage = whole.message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.reasoning) == (20, 40, 100, 10)
    assert whole.message.response_id == "chatcmpl-whole-1"


def test_openai_whole_completion_with_a_refusal_is_a_refusal_error() -> None:
    completion = {
        "id": "c2",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
                "finish_reason": "stop",
            }
        ],
    }
    run = _run(OPENAI, _json_response(completion))
    assert _error(run).kind == "refusal" and run.message.text() == "I can't help."


@pytest.mark.parametrize(
    ("error", "kind", "status"),
    [
        (
            {"message": "Rate limit reached", "type": "rate_limit_exceeded", "code": "429"},
            "rate_limit",
            429,
        ),
        (
            {
                "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: "
                "upstream said the input is over the limit",
                "type": None,
                "param": None,
                "code": "400",
            },
            "context_overflow",
            400,
        ),
        ({"message": "upstream exploded", "type": None, "code": "500"}, "server", 500),
    ],
)
def test_openai_error_object_with_200_gets_the_in_stream_kind(
    error: dict[str, Any], kind: str, status: int
) -> None:
    whole = _run(OPENAI, _json_response({"error": error}))
    chunk = b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
    streamed = _run(OPENAI, sse_response([chunk]))
    for run in (whole, streamed):
        got = _error(run)
        assert (got.kind, got.status_code) == (kind, status)
        assert run.calls == 1


def test_openai_whole_answer_without_choices_is_protocol() -> None:
    run = _run(OPENAI, _json_response({"id": "x", "object": "list", "data": []}), max_retries=2)
    assert _error(run).kind == "protocol" and "choices" in _error(run).message
    assert run.calls == 1


# --- 2xx that is neither our stream nor a whole answer ----------------------------------

LOGIN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in</title>"
    b"<style>body { font-family: sans-serif; }</style>"
    b"<script>var tracking = 'abc';</script></head>"
    b"<body><h1>Corporate SSO</h1><p>Please sign in to continue.</p></body></html>"
)


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
@pytest.mark.parametrize(
    ("content_type", "body", "says"),
    [
        ("text/html; charset=utf-8", LOGIN_PAGE, "Corporate SSO Please sign in to continue."),
        ("text/plain", b"upstream is warming up, try later", "upstream is warming up"),
        ("", b"", "with an empty body"),
        ("application/json", b"", "with an empty body"),
    ],
)
def test_a_2xx_that_is_not_a_stream_is_protocol_and_not_retried(
    api: str, content_type: str, body: bytes, says: str
) -> None:
    """If this fails: a login page or a plain-text 200 is retried three times and ends
    as "stream ended before ..." with no hint of what came back."""
    response = httpx.Response(200, headers={"content-type": content_type}, content=body)
    run = _run(api, response, max_retries=2)
    error = _error(run)
    assert error.kind == "protocol" and not error.retryable
    assert (content_type.partition(";")[0] or "no content type") in error.message
    assert says in error.message
    assert "<" not in error.message and "tracking" not in error.message
    assert "font-family" not in error.message
    assert run.calls == 1


# --- what error texts say ---------------------------------------------------------------

PROXY_502 = (
    b"<html><head><title>502 Bad Gateway</title><style>"
    + b"h1 { color: red; } " * 200
    + b"</style></head><body><center><h1>502 Bad Gateway</h1></center>"
    + b"<hr><center>nginx/1.25.3</center>"
    + b"<!-- a padding comment -->" * 100
    + b"</body></html>"
)


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_an_html_error_page_is_reduced_to_its_words_and_names_the_request(api: str) -> None:
    """If this fails: a proxy's 502 dumps thousands of characters of markup."""
    response = httpx.Response(502, headers={"content-type": "text/html"}, content=PROXY_502)
    run = _run(api, response)
    error = _error(run)
    assert error.kind == "server" and error.status_code == 502
    path = "/v1/messages" if api == ANTHROPIC else "/chat/completions"
    assert f"HTTP 502 from POST https://contract.test{path}" in error.message
    assert "502 Bad Gateway" in error.message and "nginx/1.25.3" in error.message
    assert "<" not in error.message and "color" not in error.message
    assert len(error.message) < 300


def test_a_long_plain_error_body_is_cut() -> None:
    response = httpx.Response(500, headers={"content-type": "text/plain"}, content=b"x" * 10_000)
    error = _error(_run(OPENAI, response))
    assert error.message.endswith("...") and len(error.message) < 700


def test_error_texts_carry_no_query_string() -> None:
    """The URL is named without its query (it may carry a key) or user info."""
    from stream_core import Context, Model, UserMessage, complete

    model = Model(
        id="m",
        api=ANTHROPIC,
        provider="proxy",
        base_url="https://user:pw@proxy.test/anthropic?token=sekrit",
    )

    async def main() -> Any:
        import respx

        with respx.mock(assert_all_mocked=True) as mock:
            mock.route(host="proxy.test").mock(
                return_value=_json_response({"error": {"message": "nope"}}, status=404)
            )
            return await complete(model, Context(messages=[UserMessage(content="hi")]), options())

    message = anyio.run(main)
    assert message.error is not None
    assert message.error.message.startswith("HTTP 404 from POST https://proxy.test/anthropic")
    assert "sekrit" not in message.error.message and "pw" not in message.error.message


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_a_connection_error_names_the_request(api: str) -> None:
    run = _run(api, httpx.ConnectError("connection refused"))
    error = _error(run)
    assert error.kind == "network"
    assert "POST https://contract.test/" in error.message and "connection refused" in error.message


# --- context overflow through proxies ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "litellm.ContextWindowExceededError: litellm.BadRequestError: AnthropicException - "
        "input length and max_tokens exceed context limit",
        "ContextWindowExceededError: prompt has 140000 tokens",
        "context_window_exceeded",
        "Request exceeds the model's maximum context length",
        "This model's maximum context length is 8192 tokens. However, you requested 9000",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096",
    ],
)
def test_overflow_wordings_of_proxies_are_recognised(text: str) -> None:
    assert is_context_overflow(text)


@pytest.mark.parametrize("text", ["Rate limit reached", "Invalid API key", "model not found"])
def test_other_errors_are_not_overflow(text: str) -> None:
    assert not is_context_overflow(text)


def test_litellm_overflow_behind_a_400_is_context_overflow_and_not_retried() -> None:
    body = {
        "error": {
            "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: "
            "OpenAIException - too long",
            "type": None,
            "param": None,
            "code": "400",
        }
    }
    run = _run(OPENAI, _json_response(body, status=400), max_retries=2)
    error = _error(run)
    assert (error.kind, error.status_code, error.retryable) == ("context_overflow", 400, False)
    assert run.calls == 1


def test_a_string_status_code_in_an_error_chunk_fills_status_code() -> None:
    """If this fails: `"code": "500"` from a proxy leaves status_code None and the kind
    unrelated to the status."""
    chunk = {"error": {"message": "upstream failed", "code": "503"}}
    text = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    run = _run(OPENAI, sse_response([text + b"data: " + json.dumps(chunk).encode() + b"\n\n"]))
    error = _error(run)
    assert (error.kind, error.status_code) == ("overloaded", 503)
    assert run.message.text() == "Hi"
    assert isinstance(run.message.content[0], TextContent)


def test_tool_calls_of_a_whole_answer_are_complete_calls() -> None:
    run = _run(OPENAI, _json_response(OPENAI_COMPLETION))
    assert len(run.message.tool_calls()) == 3
    for call in run.message.tool_calls():
        assert isinstance(call, ToolCall) and not call.truncated and call.partial_json == ""


# --- untrusted whole answers --------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*at, i))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


# A completion carrying reasoning signatures the way OpenRouter and LiteLLM do.
SIGNED_COMPLETION: dict[str, Any] = {
    **OPENAI_COMPLETION,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hi",
                "reasoning": "Greet.",
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "Greet.", "signature": "s", "index": 0},
                    {"type": "reasoning.encrypted", "data": "blob", "index": 1},
                ],
                "thinking_blocks": [{"type": "thinking", "thinking": "Greet.", "signature": "t"}],
            },
            "finish_reason": "stop",
        }
    ],
}


def _parse_whole(api: str, answer: Any) -> list[Any]:
    """What the pipeline does with a whole answer (`AssistantStream._read_chunk`), without
    HTTP so many shapes run fast: the provider's `parse_response`, failures as errors."""
    wire = get_provider(api).wire
    assert wire is not None and wire.parse_response is not None
    model = contract_model(api)
    out: deque[Any] = deque([MessageStart(AssistantMessage(api=api, provider="c", model="m"))])
    message = out[0].message
    asm = Assembler(message, model, wire.stop_reasons, out)
    error: StreamError | None = None
    try:
        wire.parse_response(asm, answer)
        if not asm.finished:
            error = StreamError(kind="protocol", message="incomplete")
    except StreamFailure as failure:
        error = failure.error
    except Exception as exc:  # the pipeline turns these into protocol errors too
        error = StreamError(kind="protocol", message=repr(exc))
    asm.finalize(error)
    out.append(MessageEnd(message))
    return list(out)


@pytest.mark.parametrize(
    ("api", "answer"),
    [(ANTHROPIC, ANTHROPIC_MESSAGE), (OPENAI, OPENAI_COMPLETION), (OPENAI, SIGNED_COMPLETION)],
)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_json_in_any_field_of_a_whole_answer_still_ends_cleanly(
    api: str, answer: dict[str, Any], data: st.DataObject
) -> None:
    """If this fails: a whole answer of an unexpected shape crashes the stream or leaves a
    message that does not validate."""
    path = data.draw(st.sampled_from(_paths(answer)))
    events = _parse_whole(api, _replaced(answer, path, data.draw(_JSON)))
    assert_valid_event_stream(events)
    message = events[-1].message
    assert message.stop_reason in ("stop", "length", "tool_use", "error")
    again = type(message).model_validate_json(message.model_dump_json())
    assert again.model_dump() == message.model_dump()


@pytest.mark.parametrize(
    ("page", "words"),
    [
        (
            "<p>Bad&amp;Gateway</p><script>var x = '<b>';</script ><!-- note --> end",
            "Bad&Gateway end",
        ),
        ("a < b and c > d", "a < b and c > d"),  # plain text with brackets is not markup
        ("<h1>cut</h1><style>body{}", "cut"),  # a style never closed hides the rest
        ("<" * 5000 + "<b>x</b>", "<" * 5000 + " x"),  # stray brackets stay, tags go
    ],
)
def test_strip_markup_keeps_the_visible_words(page: str, words: str) -> None:
    from stream_core._error_text import strip_markup

    assert strip_markup(page) == words
