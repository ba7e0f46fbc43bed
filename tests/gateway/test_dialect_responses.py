"""The OpenAI Responses dialect (issue 36), from the client's side: a request the provider
builds reads back to the same context and options (a property test); the encoder's bytes
read back through the provider's own translator to the same message (faux turns and every
openai-responses recording); the official `openai` SDK accumulates them; Codex's requests
read as it means them; the state carrier rides in a reasoning item and comes back."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stream_core
from stream_core import (
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ImageContent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Model,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    Source,
    StreamError,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    Usage,
    UserMessage,
    complete,
    stream,
)
from stream_core.provider import dialect, get_provider
from stream_core.testing import faux_message, faux_model, replay_client

API = "openai-responses"
DIALECT = dialect(API)
MODEL = Model(
    id="gpt-test",
    api=API,
    provider="openai",
    base_url="https://api.openai.com/v1",
    reasoning=True,
    input=["text", "image"],
)
FIXTURES = Path(__file__).parents[2] / "contract_tests" / "fixtures" / API
HI = Context(messages=[UserMessage(content="hi")])


def _wire() -> Any:
    return get_provider(API).wire


# --- parse_request is the inverse of the request builder -----------------------------------

_WORDS = st.text(string.ascii_letters + string.digits + " .,!?é-", min_size=1, max_size=24).filter(
    str.strip
)
_IDS = st.text(string.ascii_letters + string.digits, min_size=1, max_size=10)
_PNG = "iVBORw0KGgo="
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-9, 99) | _WORDS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_IDS, inner, max_size=3),
    max_leaves=6,
)


def _signature(item_id: str, text: str) -> str:
    summary = [{"type": "summary_text", "text": text}] if text else []
    item = {
        "type": "reasoning",
        "id": f"rs_{item_id}",
        "summary": summary,
        "encrypted_content": "e",
    }
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


@st.composite
def _user(draw: st.DrawFn) -> UserMessage:
    if draw(st.booleans()):
        return UserMessage(content=draw(_WORDS))
    kinds = draw(st.lists(st.sampled_from(["text", "image", "file"]), min_size=1, max_size=3))
    parts: list[Any] = []
    for kind in kinds:
        if kind == "text":
            parts.append(TextContent(text=draw(_WORDS)))
        elif kind == "image":
            parts.append(ImageContent(data=_PNG, mime_type="image/png"))
        else:
            parts.append(FileContent(data=_PNG, mime_type="application/pdf", name="a.pdf"))
    return UserMessage(content=parts)


@st.composite
def _turn(draw: st.DrawFn, n: int, tools: list[str]) -> list[Any]:
    """One assistant message (model `MODEL`'s own), then a result for each of its calls."""
    blocks: list[Any] = []
    for k, kind in enumerate(draw(st.lists(st.sampled_from("rtc"), min_size=1, max_size=4))):
        if kind == "r":
            text = draw(st.sampled_from(["", "Thinking it over."]))
            sig = _signature(f"{n}{k}", text)
            blocks.append(ThinkingContent(thinking=text, signature=sig, redacted=not text))
        elif kind == "t":
            block = TextContent(text=draw(_WORDS))
            if draw(st.booleans()):
                block.text_signature = json.dumps({"id": f"msg_{n}{k}"}, separators=(",", ":"))
            if draw(st.booleans()):
                end = len(block.text)
                block.citations = [Citation(url="https://a.test/x", title="A", start=0, end=end)]
            blocks.append(block)
        elif tools:
            args = draw(st.dictionaries(_IDS, _JSON_VALUES, max_size=3))
            call = ToolCall(id=f"call_{n}_{k}", name=draw(st.sampled_from(tools)), arguments=args)
            if draw(st.booleans()):
                call.thought_signature = f"fc_{n}{k}"
            blocks.append(call)
    if not blocks:
        blocks.append(TextContent(text="ok"))
    out: list[Any] = [AssistantMessage(api=API, provider="openai", model=MODEL.id, content=blocks)]
    for b in blocks:
        if isinstance(b, ToolCall):
            out.append(
                ToolResultMessage(
                    tool_call_id=b.id,
                    tool_name=b.name,
                    content=[TextContent(text=draw(_WORDS))],
                    is_error=draw(st.booleans()),
                )
            )
    return out


@st.composite
def _request(draw: st.DrawFn) -> tuple[Context, StreamOptions]:
    names = draw(st.lists(st.sampled_from(["look", "find", "run"]), unique=True, max_size=3))
    tools: list[Any] = [
        Tool(name=name, description=f"The {name} tool.", parameters={"type": "object"})
        for name in names
    ]
    if draw(st.booleans()):
        domains = draw(st.one_of(st.none(), st.just(["a.test"])))
        tools.append(ServerTool(kind="web_search", allowed_domains=domains))
    messages: list[Any] = []
    for n in range(draw(st.integers(1, 3))):
        messages.append(draw(_user()))
        if draw(st.booleans()):
            messages += draw(_turn(n, names))
    kw: dict[str, Any] = {
        "max_tokens": draw(st.none() | st.integers(1, 100_000)),
        "temperature": draw(st.none() | st.floats(0, 2)),
        "top_p": draw(st.none() | st.floats(0.01, 1)),
        "reasoning": draw(st.none() | st.sampled_from(["minimal", "low", "medium", "high"])),
        "session_id": draw(st.none() | _IDS),
        "cache_retention": draw(st.sampled_from(["short", "long"])),
    }
    if tools:
        kw["parallel_tool_calls"] = draw(st.none() | st.booleans())
        choices = ["auto", "none", "required", *({"tool": n} for n in names)]
        kw["tool_choice"] = draw(st.none() | st.sampled_from(choices))
    if draw(st.booleans()):
        props = {"answer": {"type": "string"}}
        kw["output_schema"] = {"title": "Answer", "type": "object", "properties": props}
    system = draw(st.none() | _WORDS)
    return Context(system_prompt=system, messages=messages, tools=tools or None), StreamOptions(
        **kw
    )


def _block(b: Any) -> Any:
    if isinstance(b, TextContent):
        cites = [(c.url, c.title, c.start, c.end) for c in b.citations or ()]
        return ("text", b.text, b.text_signature, cites)
    if isinstance(b, ToolCall):
        return ("call", b.id, b.name, b.arguments, b.thought_signature, b.builtin, b.truncated)
    return b.model_dump(mode="json")


def _messages(messages: list[Any]) -> list[Any]:
    out: list[Any] = []
    for m in messages:
        if isinstance(m, UserMessage):
            content = [TextContent(text=m.content)] if isinstance(m.content, str) else m.content
            out.append(("user", [_block(b) for b in content]))
        elif isinstance(m, AssistantMessage):
            out.append(("assistant", m.model, [_block(b) for b in m.content]))
        else:
            out.append(("result", m.tool_call_id, m.tool_name, m.text(), m.is_error))
    return out


_OPTIONS = ("max_tokens", "temperature", "top_p", "reasoning", "tool_choice")
_OPTIONS += ("parallel_tool_calls", "session_id", "cache_retention", "output_schema")


def _options(o: StreamOptions) -> dict[str, Any]:
    out = {name: getattr(o, name) for name in _OPTIONS}
    if o.session_id is None:
        out["cache_retention"] = "short"  # nothing cached by key: the retention is not sent
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_request())
def test_a_built_request_reads_back_to_its_context_and_options(
    case: tuple[Context, StreamOptions],
) -> None:
    context, options = case
    payload = _wire().build_request(MODEL, context, options).payload
    body = json.loads(json.dumps(payload))  # as a client sends it
    inbound = DIALECT.parse_request(body, {})
    assert inbound.model == MODEL.id and inbound.stream is True
    assert inbound.context.system_prompt == context.system_prompt
    assert _messages(inbound.context.messages) == _messages(context.messages)
    got_tools = [t.model_dump() for t in inbound.context.tools or ()]
    assert got_tools == [t.model_dump() for t in context.tools or ()]
    assert _options(inbound.options) == _options(options)
    assert set(inbound.unmodeled) <= {"store", "include"}
    assert not inbound.carriers


# --- the encoder's bytes read back through the provider's translator -----------------------


def _reader(body: bytes) -> Any:
    """The provider reading `body` (the encoder's bytes) as a vendor's answer."""
    options = StreamOptions(api_key="k", client=replay_client(body), max_retries=0)
    return complete(MODEL, HI, options)


async def _encode(model: Any, context: Context, carrier: Any = None, **kw: Any) -> Any:
    """Streams `model`, feeding each event to the dialect's encoder as the gateway does."""
    encoder = DIALECT.encoder("gpt-client", carrier)
    chunks: list[bytes] = []
    async with stream(model, context, StreamOptions(**kw)) as s:
        async for event in s:
            chunks.append(encoder.feed(event))
        message = await s.result()
    return b"".join(chunks), message


def _portable(m: AssistantMessage) -> dict[str, Any]:
    """What any upstream's answer keeps through the dialect (the rest rides in the
    carrier): text and its citations, thinking text, calls, usage, stop reason, error."""
    blocks: list[Any] = []
    for b in m.content:
        if isinstance(b, TextContent):
            blocks.append(
                ("text", b.text, [(c.url, c.title, c.start, c.end) for c in b.citations or ()])
            )
        elif isinstance(b, ThinkingContent) and b.thinking:
            blocks.append(("thinking", b.thinking))
        elif isinstance(b, ToolCall):
            blocks.append(("call", b.id, b.name, None if b.truncated else b.arguments, b.truncated))
    usage = {k: getattr(m.usage, k) for k in ("input", "output", "cache_read", "cache_write")}
    usage["reasoning"] = m.usage.reasoning
    kind = m.error.kind if m.error is not None else None
    return {"content": blocks, "usage": usage, "stop": m.stop_reason, "error": kind}


def _faux(content: list[Any], **fields: Any) -> AssistantMessage:
    return AssistantMessage(api="faux", provider="faux", model="m", content=content, **fields)


CITED = TextContent(
    text="Low tide is at 07:40 and high tide at 13:55.",
    citations=[
        Citation(url="https://tides.test/a", title="Tides", start=0, end=20),
        Citation(url="https://tides.test/b", title="More tides", start=25, end=44),
    ],
)
TURNS = {
    "text": _faux([TextContent(text="Hello there.")], usage=Usage(input=12, output=4)),
    "thinking and parallel calls": _faux(
        [
            ThinkingContent(thinking="Let me look both up.", signature="sig-from-anthropic"),
            TextContent(text="Looking both up."),
            ToolCall(id="toolu_01", name="look", arguments={"q": "one", "n": [1, 2]}),
            ToolCall(id="toolu_02", name="find", arguments={"q": "two"}),
        ],
        stop_reason="tool_use",
        usage=Usage(input=120, output=40, cache_read=30, cache_write=7, reasoning=12),
    ),
    "citations": _faux([CITED], usage=Usage(input=50, output=20)),
    "redacted thinking": _faux(
        [ThinkingContent(thinking="", signature="opaque", redacted=True), TextContent(text="Hi")]
    ),
    "a length cut mid-call": _faux(
        [
            TextContent(text="Writing it"),
            ToolCall(id="c9", name="write", partial_json='{"path": "a.t', truncated=True),
        ],
        stop_reason="length",
        usage=Usage(input=5, output=9),
    ),
    "an error after content": _faux(
        [TextContent(text="Half an answer")],
        stop_reason="error",
        error=StreamError(kind="rate_limit", message="Rate limit reached; try again in 2s"),
    ),
    "structured output": _faux([TextContent(text='{"city": "Paris", "temp_c": 18.5}')]),
}


@pytest.mark.parametrize("name", list(TURNS))
def test_a_faux_turn_reads_back_through_the_translator(name: str) -> None:
    script = TURNS[name]
    body, streamed = anyio.run(_encode, faux_model([faux_message(script)], chunk_size=3), HI)
    back = anyio.run(_reader, body)
    want = _portable(streamed)
    assert _portable(back) == want
    if name == "text":
        assert want["content"] == [("text", "Hello there.", [])]


def _recordings() -> list[Path]:
    return sorted(FIXTURES.glob("*.body"))


async def _replayed(body: bytes, meta: dict[str, Any], encode: bool) -> tuple[bytes, Any]:
    """The recording (or the encoder's bytes) through the provider, as the contract kit
    plays it, each event fed to the encoder."""
    stream_core.configure_limits()
    call = dict(meta.get("call") or {})
    mode = call.pop("structured_output", None)
    model = MODEL.model_copy(update={"structured_output": mode})
    if meta.get("request_tools"):
        added = meta["request_tools"]
        call["on_payload"] = lambda p, m: {**p, "tools": [*(p.get("tools") or []), *added]}
    headers = dict(meta.get("headers") or {}) if not encode else {}
    status = int(meta.get("status") or 200) if not encode else 200
    client = replay_client(body, status=status, headers=headers or None)
    encoder = DIALECT.encoder("gpt-client", None)
    chunks: list[bytes] = []
    options = StreamOptions(api_key="k", client=client, max_retries=0, **call)
    async with stream(model, HI, options) as s:
        async for event in s:
            if not encode:
                chunks.append(encoder.feed(event))
        message = await s.result()
    return b"".join(chunks), message


def _whole(m: AssistantMessage) -> dict[str, Any]:
    content = [b.model_dump(mode="json") for b in m.content]
    usage = m.usage.model_dump(exclude={"cost", "total_tokens", "clamped"})
    kind = m.error.kind if m.error is not None else None
    return {"content": content, "usage": usage, "stop": m.stop_reason, "error": kind}


@pytest.mark.parametrize("path", _recordings(), ids=lambda p: p.stem)
def test_a_recording_reads_back_through_the_translator(path: Path) -> None:
    """The provider's own answer, written by the encoder, is the same answer again: every
    signature, item id, built-in and server item, citation and usage count."""
    meta = json.loads(path.with_suffix(".json").read_text())
    body, first = anyio.run(_replayed, path.read_bytes(), meta, False)
    _, again = anyio.run(_replayed, body, meta, True)
    want, got = _whole(first), _whole(again)
    for mine, theirs in zip(want["content"], got["content"], strict=False):
        if mine["type"] == "text" and mine["text_signature"] is None:
            # A message item always gets an id (the SDK tells items apart by it).
            theirs["text_signature"] = None
    assert got == want
    assert again.raw_stop_reason == first.raw_stop_reason


# --- the official openai SDK reads the encoder's bytes -------------------------------------


def _sdk(body: bytes, status: int = 200, media: str = "text/event-stream") -> Any:
    openai = pytest.importorskip("openai")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": media}, content=body)

    transport = httpx.MockTransport(answer)
    return openai.OpenAI(
        api_key="k",
        base_url="http://gateway.test/v1",
        http_client=httpx.Client(transport=transport),
        max_retries=0,
    )


def _events(message: AssistantMessage, carrier: Any = None) -> bytes:
    body, _ = anyio.run(_encode, faux_model([faux_message(message)], chunk_size=5), HI, carrier)
    return bytes(body)


def test_the_sdk_accumulates_a_stream_to_the_message() -> None:
    script = TURNS["thinking and parallel calls"]
    with _sdk(_events(script)) as client:
        with client.responses.stream(model="gpt-client", input="hi") as s:
            final = s.get_final_response()
    assert final.model == "gpt-client" and final.status == "completed"
    assert [o.type for o in final.output] == ["reasoning", "message", "function_call"] + [
        "function_call"
    ]
    assert final.output[0].summary[0].text == "Let me look both up."
    assert final.output_text == "Looking both up."
    calls = [(o.call_id, o.name, json.loads(o.arguments)) for o in final.output[2:]]
    assert calls == [(b.id, b.name, b.arguments) for b in script.tool_calls()]
    usage = final.usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (157, 30)
    assert (usage.output_tokens, usage.output_tokens_details.reasoning_tokens) == (40, 12)
    assert usage.total_tokens == 197


def test_the_sdk_reads_citations_as_annotations() -> None:
    with _sdk(_events(TURNS["citations"])) as client:
        with client.responses.stream(model="gpt-client", input="hi") as s:
            final = s.get_final_response()
    notes = final.output[0].content[0].annotations
    assert [(a.url, a.title, a.start_index, a.end_index) for a in notes] == [
        (c.url, c.title, c.start, c.end) for c in CITED.citations or ()
    ]


def test_every_event_has_its_sequence_number_in_order() -> None:
    with _sdk(_events(TURNS["thinking and parallel calls"])) as client:
        events = list(client.responses.create(model="gpt-client", input="hi", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    kinds = {e.type for e in events}
    assert {
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    } <= kinds


def test_a_length_cut_is_an_incomplete_response() -> None:
    with _sdk(_events(TURNS["a length cut mid-call"])) as client:
        events = list(client.responses.create(model="gpt-client", input="hi", stream=True))
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"
    call = last.response.output[-1]
    assert (call.type, call.status, call.arguments) == (
        "function_call",
        "incomplete",
        '{"path": "a.t',
    )


def test_an_error_after_content_is_a_failed_response_with_the_code() -> None:
    with _sdk(_events(TURNS["an error after content"])) as client:
        events = list(client.responses.create(model="gpt-client", input="hi", stream=True))
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.error.code == "rate_limit_exceeded"  # Codex retries on it
    assert "try again in 2s" in last.response.error.message
    assert last.response.output[0].content[0].text == "Half an answer"


@pytest.mark.parametrize(
    "kind",
    ["rate_limit", "overloaded", "server", "context_overflow", "invalid_request", "auth"]
    + ["not_found", "timeout", "refusal", "content_filter", "network", "protocol"],
)
def test_a_mid_stream_error_reads_back_as_its_kind(kind: str) -> None:
    script = _faux(
        [TextContent(text="So far")],
        stop_reason="error",
        error=StreamError(kind=kind, message=f"upstream said {kind}"),  # type: ignore[arg-type]
    )
    back = anyio.run(_reader, _events(script))
    assert back.error is not None and back.error.kind == kind
    assert back.text() == "So far"


def test_the_sdk_reads_the_non_streamed_response() -> None:
    script = TURNS["thinking and parallel calls"]
    body = DIALECT.message_body(script, "gpt-client", None)
    with _sdk(json.dumps(body).encode(), media="application/json") as client:
        final = client.responses.create(model="gpt-client", input="hi")
    assert final.output_text == "Looking both up." and final.status == "completed"
    assert [o.name for o in final.output if o.type == "function_call"] == ["look", "find"]
    assert final.usage is not None and final.usage.input_tokens == 157
    back = anyio.run(_reader, json.dumps(body).encode())
    assert _portable(back) == _portable(script)


@pytest.mark.parametrize(
    ("kind", "status", "error_class", "code"),
    [
        ("rate_limit", 429, "RateLimitError", "rate_limit_exceeded"),
        ("context_overflow", 400, "BadRequestError", "context_length_exceeded"),
        ("invalid_request", 400, "BadRequestError", None),
        ("auth", 401, "AuthenticationError", "invalid_api_key"),
        ("not_found", 404, "NotFoundError", "model_not_found"),
        ("server", 500, "InternalServerError", None),
        ("overloaded", 503, "InternalServerError", None),
    ],
)
def test_an_error_before_content_is_openais_error(
    kind: str, status: int, error_class: str, code: str | None
) -> None:
    openai = pytest.importorskip("openai")
    got, body = DIALECT.error_body(kind, "it failed")  # type: ignore[arg-type]
    assert got == status and set(body["error"]) == {"message", "type", "param", "code"}
    with _sdk(json.dumps(body).encode(), status=status, media="application/json") as client:
        with pytest.raises(getattr(openai, error_class)) as raised:
            client.responses.create(model="gpt-client", input="hi")
    assert raised.value.code == code and "it failed" in raised.value.message


def _feed(message: AssistantMessage, deltas: list[Any], carrier: Any = None) -> bytes:
    """Events fed by hand, the message changing between them as a live one does."""
    encoder = DIALECT.encoder("gpt-client", carrier)
    out = [encoder.feed(MessageStart(message))]
    for delta in deltas:
        if callable(delta):
            delta()
        else:
            out.append(encoder.feed(MessageUpdate(message, delta)))
    out.append(encoder.feed(MessageEnd(message)))
    return b"".join(out)


def test_a_call_named_after_its_first_arguments_is_shown_once_named() -> None:
    call = ToolCall(id="", name="")
    live = AssistantMessage(
        api="openai-completions", provider="x", model="m", content=[call], stop_reason="tool_use"
    )

    def named() -> None:
        call.id, call.name = "call_late", "look"

    body = _feed(
        live,
        [
            ToolCallStart(0),
            ToolCallDelta(0, '{"q": '),
            named,
            ToolCallDelta(0, '"x"}'),
            ToolCallEnd(0),
        ],
    )
    with _sdk(body) as client:
        with client.responses.stream(model="gpt-client", input="hi") as s:
            final = s.get_final_response()
    (item,) = final.output
    assert (item.call_id, item.name, item.arguments) == ("call_late", "look", '{"q": "x"}')


def test_another_vendors_web_search_is_a_web_search_call_with_its_sources() -> None:
    call = ServerToolCall(
        id="srvtoolu_1",
        name="web_search",
        kind="web_search",
        input={"query": "tides"},
        raw={"type": "server_tool_use", "id": "srvtoolu_1"},
    )
    found = ServerToolResult(
        call_id="srvtoolu_1",
        name="web_search",
        kind="web_search",
        sources=[Source(url="https://tides.test/a", title="Tides")],
        raw={"type": "web_search_tool_result"},
    )
    answer = AssistantMessage(
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        content=[call, found, CITED],
        usage=Usage(input=9, output=3, server_tools={"web_search": 1}),
    )
    body = DIALECT.message_body(answer, "gpt-client", None)
    search, message = body["output"]
    assert search["type"] == "web_search_call" and search["id"] == "srvtoolu_1"
    assert search["action"] == {
        "type": "search",
        "query": "tides",
        "sources": [{"type": "url", "url": "https://tides.test/a", "title": "Tides"}],
    }
    assert len(message["content"][0]["annotations"]) == 2
    assert body["tool_usage"] == {"web_search": {"num_requests": 1}}
    back = anyio.run(_reader, json.dumps(body).encode())
    assert back.usage.server_tools == {"web_search": 1}
    assert [b.type for b in back.content] == ["server_tool_call", "server_tool_result", "text"]
