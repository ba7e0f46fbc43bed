"""The Anthropic Messages dialect (issue 36), from an Anthropic client's side.

Both directions are the provider's own, turned round: a request the provider builds
parses back to the context and options it was built from (a property test), and the
events of an answer (scripted faux turns, and every Anthropic recording of the contract
suite) written by the dialect's encoder read back, through the provider's translator, to
the same message; the official `anthropic` SDK accumulates the same bytes to the same
content, usage and stop reason. A state carrier rides at the end and comes back out of the
next request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import stream_core
from stream_core import (
    AssistantMessage,
    BlockEnd,
    BlockStart,
    Citation,
    CitationAdded,
    Context,
    FileContent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Model,
    ServerToolCall,
    ServerToolResult,
    Source,
    StreamError,
    StreamOptions,
    TextContent,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingContent,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import CARRIER_PREFIX, dialect
from stream_core.providers._anthropic_encode import error_type
from stream_core.providers.anthropic import ERROR_TYPES
from stream_core.testing import (
    faux_message,
    faux_model,
    faux_server_tool,
    faux_web_search,
    replay_client,
)

API = "anthropic-messages"
DIALECT = dialect(API)
FIXTURES = Path(stream_core.__file__).parent / "contract_tests" / "fixtures" / API
MODEL = Model(
    id="claude-sonnet-4-5",
    api=API,
    provider="anthropic",
    base_url="https://api.anthropic.com",
    reasoning=True,
    input=["text", "image"],
    max_tokens=64_000,
)
ASK = Context(messages=[UserMessage(content="hi")])
SKIP = {"timestamp", "ttft_ms", "duration_ms", "response_model", "request_id", "limits"}


# --- helpers ------------------------------------------------------------------------------


def _opts(**more: Any) -> StreamOptions:
    return StreamOptions(api_key="sk-test-0123456789", max_retries=0, **more)


async def _encode(model: Model, opts: StreamOptions, carrier: Any = None) -> tuple[Any, bytes]:
    """Stream `model`, feeding each event to the encoder as it arrives (the message is
    live: what the encoder reads of it is what was known then)."""
    encoder = DIALECT.encoder("claude-client-name", carrier)
    chunks = []
    async with stream_core.stream(model, ASK, opts) as s:
        async for event in s:
            chunks.append(encoder.feed(event))
        message = await s.result()
    return message, b"".join(chunks)


async def _read(body: bytes, **more: Any) -> AssistantMessage:
    """`body` through the Anthropic provider's own translator."""
    async with stream_core.stream(MODEL, ASK, _opts(client=replay_client(body), **more)) as s:
        return await s.result()


def _faux(turn: Any) -> tuple[AssistantMessage, AssistantMessage, bytes]:
    async def main() -> tuple[AssistantMessage, AssistantMessage, bytes]:
        message, body = await _encode(faux_model([turn]), _opts())
        return message, await _read(body), body

    return anyio.run(main)


def _without_raw(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_raw(v) for k, v in value.items() if k != "raw"}
    if isinstance(value, list):
        return [_without_raw(v) for v in value]
    return value


def _same(a: AssistantMessage, b: AssistantMessage, *, raw: bool = True) -> None:
    want = a.model_dump(mode="json", exclude={*SKIP, "api", "provider", "model"})
    got = b.model_dump(mode="json", exclude={*SKIP, "api", "provider", "model"})
    want["usage"].pop("cost"), got["usage"].pop("cost")  # the models' prices differ
    if a.response_id is None:
        got["response_id"] = None  # the encoder names an answer that had no id
    if a.api != API:
        del want["raw_stop_reason"]  # another vendor's word
    if not raw:
        want, got = _without_raw(want), _without_raw(got)
    if a.error is not None and b.error is not None and a.error.kind != "refusal":
        # A kind Anthropic has no word for is said as `api_error` and read back `server`.
        want["error"]["kind"] = ERROR_TYPES.get(error_type(a.error.kind), "server")
    for key in want:
        assert got[key] == want[key], key


def _events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in body.decode().split("\n\n"):
        if frame:
            name, data = frame.split("\n", 1)
            out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


# --- scripted turns -----------------------------------------------------------------------

USAGE = Usage(input=120, output=40, cache_read=900, cache_write=300, reasoning=12)
CITE = Citation(url="https://a.example/x", title="A", cited_text="quoted")

TURNS: dict[str, AssistantMessage] = {
    "thinking and parallel calls": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[
            ThinkingContent(thinking="Let me look.", signature="sig-1"),
            TextContent(text="Looking both up."),
            ToolCall(id="toolu_1", name="look", arguments={"q": "one"}),
            ToolCall(id="toolu_2", name="find", arguments={"q": "two", "n": [1, 2]}),
        ],
        stop_reason="tool_use",
        usage=USAGE,
    ),
    "redacted thinking and a cited answer": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[
            ThinkingContent(signature="opaque==", redacted=True),
            TextContent(text="It says so.", citations=[CITE]),
        ],
        usage=Usage(input=5, output=7),
    ),
    "a call cut by the output limit": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[
            TextContent(text="Writing it."),
            ToolCall(id="toolu_9", name="write", arguments={"path": "a.txt"}, truncated=True),
        ],
        stop_reason="length",
        usage=Usage(input=9, output=4096),
    ),
    "an error after content": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[TextContent(text="Half an ans")],
        stop_reason="error",
        error=StreamError(kind="overloaded", message="Overloaded"),
        usage=Usage(input=3, output=2),
    ),
    "an error in the middle of a call": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[
            ToolCall(id="toolu_1", name="look", arguments={"q": "one"}),
            ToolCall(id="toolu_2", name="find", partial_json='{"q": "tw', truncated=True),
        ],
        stop_reason="error",
        error=StreamError(kind="overloaded", message="Overloaded"),
    ),
    "a refusal": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[TextContent(text="I")],
        stop_reason="error",
        raw_stop_reason="refusal",
        error=StreamError(kind="refusal", message="the model stopped: refusal (policy)"),
    ),
    "a vendor block and a container": AssistantMessage(
        api="faux",
        provider="faux",
        model="m",
        content=[
            VendorContent(api=API, data={"type": "compaction", "content": "summary"}),
            TextContent(text="Done."),
        ],
        container={"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
        usage=Usage(input=1, output=1, server_tools={"code_execution": 2}),
    ),
}


@pytest.mark.parametrize("name", TURNS)
def test_a_scripted_answer_reads_back_the_same_through_the_translator(name: str) -> None:
    message, back, _ = _faux(faux_message(TURNS[name]))
    _same(message, back, raw=False)


def test_server_tools_with_citations_read_back_the_same() -> None:
    web = faux_web_search("weather", [("https://w.example", "W")], "Sunny.", usage=USAGE)
    message, back, _ = _faux(web)
    _same(message, back, raw=False)
    ran = ServerToolResult(name="code_execution", kind="code_execution", text="1\n", exit_code=0)
    code = faux_server_tool("code_execution", {"code": "print(1)"}, result=ran, text="One.")
    message, back, _ = _faux(code)
    _same(message, back, raw=False)


def test_usage_is_exact_at_message_start_and_at_the_end() -> None:
    _, _, body = _faux(faux_message(TURNS["thinking and parallel calls"]))
    events = _events(body)
    assert [n for n, _ in events][:2] == ["message_start", "content_block_start"]
    start = events[0][1]["message"]
    assert start["model"] == "claude-client-name" and start["content"] == []
    assert set(start["usage"]) == {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    }
    end = dict(events)["message_delta"]
    assert end["delta"]["stop_reason"] == "tool_use"
    assert end["usage"] == {
        "input_tokens": 120,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 900,
        "output_tokens": 40,
        "output_tokens_details": {"thinking_tokens": 12},
    }
    assert [n for n, _ in events][-1] == "message_stop"


def test_a_cut_call_stops_and_the_answer_says_max_tokens() -> None:
    _, back, body = _faux(faux_message(TURNS["a call cut by the output limit"]))
    events = _events(body)
    assert dict(events)["message_delta"]["delta"]["stop_reason"] == "max_tokens"
    assert [n for n, _ in events].count("content_block_stop") == 2
    assert back.stop_reason == "length" and back.tool_calls()[0].truncated


def test_an_error_after_content_is_anthropics_error_event() -> None:
    _, _, body = _faux(faux_message(TURNS["an error after content"]))
    events = _events(body)
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    assert "message_delta" not in dict(events)


# --- recordings ---------------------------------------------------------------------------

RECORDINGS = sorted(FIXTURES.glob("*.body"))


@pytest.mark.parametrize("body", RECORDINGS, ids=lambda p: p.stem)
def test_every_recording_reads_back_the_same(body: Path) -> None:
    """A vendor's recorded answer, translated, encoded and translated again: the same
    message (raw blocks, citations, signatures, usage, container and stop reason)."""
    call = json.loads(body.with_suffix(".json").read_text()).get("call") or {}
    more = {"output_schema": call["output_schema"]} if "output_schema" in call else {}

    async def main() -> tuple[AssistantMessage, AssistantMessage]:
        message, encoded = await _encode(MODEL, _opts(client=replay_client(body), **more))
        return message, await _read(encoded, **more)

    message, back = anyio.run(main)
    _same(message, back)


# --- the official SDK ---------------------------------------------------------------------


def _sdk(body: bytes, *, streamed: bool = True) -> Any:
    anthropic = pytest.importorskip("anthropic")
    try:
        import httpx2 as http2  # the SDK's own HTTP client (anthropic 2.16 and later)
    except ImportError:
        import httpx as http2

    def answer(request: Any) -> Any:
        kind = "text/event-stream" if streamed else "application/json"
        return http2.Response(200, headers={"content-type": kind}, content=body)

    http = http2.Client(transport=http2.MockTransport(answer))
    client = anthropic.Anthropic(
        api_key="k", base_url="http://gateway.test", http_client=http, max_retries=0
    )
    with client:
        ask = {
            "model": "claude-client-name",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
        }
        if not streamed:
            return client.messages.create(**ask)
        with client.messages.stream(**ask) as s:
            return s.get_final_message()


def _sdk_view(final: Any) -> dict[str, Any]:
    data = final.model_dump(mode="json", exclude_none=True, warnings=False)
    data.pop("stop_details", None)
    data.pop("id")  # made up for an answer without one, each time
    data["usage"] = {k: v for k, v in data["usage"].items() if v}
    return data


SDK_CASES = [*TURNS, "web search"]


@pytest.mark.parametrize("name", [n for n in SDK_CASES if "error" not in n])
def test_the_anthropic_sdk_accumulates_the_stream_to_the_non_streamed_message(name: str) -> None:
    turn = (
        faux_web_search("weather", [("https://w.example", "W")], "Sunny.")
        if name == "web search"
        else faux_message(TURNS[name])
    )
    message, _, body = _faux(turn)
    whole = DIALECT.message_body(message, "claude-client-name", None)
    streamed = _sdk_view(_sdk(body))
    unstreamed = _sdk_view(_sdk(json.dumps(whole).encode(), streamed=False))
    assert streamed == unstreamed
    assert streamed["stop_reason"] == whole["stop_reason"]
    assert len(streamed["content"]) == len(message.content) - sum(
        isinstance(b, FileContent) for b in message.content
    )


def test_the_sdk_reads_a_recorded_answer_re_encoded() -> None:
    body = FIXTURES / "pydantic-ai__test_anthropic_model_web_search_tool_stream.0.body"

    async def main() -> tuple[AssistantMessage, bytes]:
        return await _encode(MODEL, _opts(client=replay_client(body)))

    message, encoded = anyio.run(main)
    final = _sdk(encoded)
    assert [b.type for b in final.content] == [
        json.loads(json.dumps(b))["type"]
        for b in DIALECT.message_body(message, "m", None)["content"]
    ]
    assert final.usage.input_tokens == message.usage.input
    assert final.usage.output_tokens == message.usage.output
    assert final.usage.server_tool_use.web_search_requests == 2
    assert "".join(b.text for b in final.content if b.type == "text") == message.text()


def test_the_non_streamed_message_reads_back_through_the_translator() -> None:
    message, _, _ = _faux(faux_message(TURNS["thinking and parallel calls"]))
    whole = json.dumps(DIALECT.message_body(message, "claude-client-name", None)).encode()

    async def main() -> AssistantMessage:
        client = replay_client(whole, headers={"content-type": "application/json"})
        async with stream_core.stream(MODEL, ASK, _opts(client=client)) as s:
            return await s.result()

    _same(message, anyio.run(main), raw=False)


# --- the state carrier --------------------------------------------------------------------


def test_a_carrier_rides_last_and_comes_back_out_of_the_next_request() -> None:
    carrier = CARRIER_PREFIX + "c3RhdGU"
    turn = faux_message(TURNS["thinking and parallel calls"])

    async def main() -> tuple[AssistantMessage, bytes]:
        return await _encode(faux_model([turn]), _opts(), carrier=lambda m: carrier)

    message, body = anyio.run(main)
    names = [n for n, _ in _events(body)]
    assert names[-4:] == [
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    final = _sdk(body)
    assert final.content[-1].type == "redacted_thinking" and final.content[-1].data == carrier
    assert DIALECT.message_body(message, "m", lambda m: carrier)["content"][-1]["data"] == carrier
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "2"},
            ],
        },
    ]
    body_in = {"model": "m", "max_tokens": 10, "messages": history}
    inbound = DIALECT.parse_request(body_in, {})
    assert inbound.carriers == {1: carrier}
    read = inbound.context.messages[1]
    assert isinstance(read, AssistantMessage)
    assert [b.type for b in read.content] == ["thinking", "text", "tool_call", "tool_call"]
    assert read.content[0].signature == "sig-1"  # type: ignore[union-attr]
    assert [m.tool_name for m in inbound.context.messages[2:]] == ["look", "find"]  # type: ignore[union-attr]


def test_no_carrier_when_it_returns_none() -> None:
    _, _, body = _faux(faux_message(TURNS["a refusal"]))
    assert b"redacted_thinking" not in body


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "word"),
    [
        ("rate_limit", 429, "rate_limit_error"),
        ("overloaded", 529, "overloaded_error"),
        ("auth", 401, "authentication_error"),
        ("not_found", 404, "not_found_error"),
        ("invalid_request", 400, "invalid_request_error"),
        ("context_overflow", 400, "invalid_request_error"),
        ("server", 500, "api_error"),
        ("timeout", 504, "timeout_error"),
        ("budget", 429, "rate_limit_error"),
        ("network", 500, "api_error"),
    ],
)
def test_an_error_before_content_is_anthropics_http_error(
    kind: Any, status: int, word: str
) -> None:
    got_status, body = DIALECT.error_body(kind, "it failed")
    assert got_status == status
    assert body["type"] == "error" and body["error"]["type"] == word
    if kind in ERROR_TYPES.values() and kind != "context_overflow":
        assert ERROR_TYPES[word] == kind


def test_a_context_overflow_is_worded_as_anthropic_words_it() -> None:
    _, body = DIALECT.error_body("context_overflow", "maximum context length is 8192 tokens")
    assert body["error"]["message"].startswith("prompt is too long")
    assert stream_core.is_context_overflow(body["error"]["message"])


# --- another vendor's stream --------------------------------------------------------------


def test_a_foreign_stream_names_calls_late_cites_late_and_keeps_no_file() -> None:
    """What other APIs do: a call's id and name after its start, a citation once its text
    block ended (Gemini grounds at the end), another API's citation record, a generated
    file (no Anthropic block: the carrier keeps it)."""
    message = AssistantMessage(api="google-generative-ai", provider="google", model="g")
    message.usage = Usage(input=7)
    encoder = DIALECT.encoder("claude-client-name", None)
    chunks = [encoder.feed(MessageStart(message))]

    def feed(delta: Any) -> None:
        chunks.append(encoder.feed(MessageUpdate(message, delta)))

    call = ToolCall()
    message.content.append(call)
    feed(ToolCallStart(0))
    call.id, call.name = "call_1", "look"
    feed(ToolCallDelta(0, '{"q": 1}'))
    call.arguments = {"q": 1}
    feed(ToolCallEnd(0))
    text = TextContent(text="Cited.")
    message.content.append(text)
    feed(TextStart(1))
    feed(TextDelta(1, "Cited."))
    feed(TextEnd(1))
    cite = Citation(url="https://g.example", title="G", raw={"type": "url_citation", "x": 1})
    text.citations = [cite]
    feed(CitationAdded(1, cite))
    message.content.append(FileContent(data="aW1n", mime_type="image/png"))
    feed(BlockStart(2, "file"))
    feed(BlockEnd(2))
    message.stop_reason, message.usage = "tool_use", Usage(input=7, output=5)
    chunks.append(encoder.feed(MessageEnd(message)))
    body = b"".join(chunks)
    back = anyio.run(_read, body)
    assert [b.type for b in back.content] == ["tool_call", "text"]
    assert back.tool_calls()[0].model_dump(include={"id", "name", "arguments"}) == {
        "id": "call_1",
        "name": "look",
        "arguments": {"q": 1},
    }
    (got,) = back.citations()
    assert (got.url, got.title, got.raw["type"]) == (
        "https://g.example",
        "G",
        "web_search_result_location",
    )  # type: ignore[index]
    assert (back.stop_reason, back.usage.input, back.usage.output) == ("tool_use", 7, 5)
    final = _sdk(body)
    assert [b.type for b in final.content] == ["tool_use", "text"]
    assert final.content[1].citations[0].url == "https://g.example"


def test_another_vendors_web_search_is_said_in_anthropics_words() -> None:
    """Gemini names its search `google_search` (kind web_search): an Anthropic client gets
    a `web_search` call and a `web_search_tool_result` listing the sources."""
    found = ServerToolResult(
        call_id="g1",
        name="google_search",
        kind="web_search",
        sources=[Source(url="https://w.example", title="W")],
        raw={"groundingChunks": []},
    )
    searched = AssistantMessage(
        api="faux", provider="faux", model="m",
        content=[
            ServerToolCall(id="g1", name="google_search", kind="web_search",
                           input={"query": "w"}, raw={"googleSearch": {}}),
            found,
            TextContent(text="Sunny."),
        ],
    )  # fmt: skip
    message, back, body = _faux(faux_message(searched))
    starts = [d["content_block"] for n, d in _events(body) if n == "content_block_start"]
    assert [(b["type"], b.get("name")) for b in starts] == [
        ("server_tool_use", "web_search"),
        ("web_search_tool_result", None),
        ("text", None),
    ]
    assert starts[1]["content"][0]["url"] == "https://w.example"
    call, result = back.content[:2]
    assert (call.name, call.kind, call.input) == ("web_search", "web_search", {"query": "w"})  # type: ignore[union-attr]
    assert [s.url for s in result.sources] == ["https://w.example"]  # type: ignore[union-attr]
    final = _sdk(body)
    assert [b.type for b in final.content] == ["server_tool_use", "web_search_tool_result", "text"]
