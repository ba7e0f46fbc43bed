"""The Chat Completions dialect (issue 36), from the client's side: a request the
`openai-completions` provider builds parses back to its context and options; a stream's
events written as `chat.completion.chunk`s read back to the same message through the
provider's own translator and through the official `openai` SDK's accumulation; the
gateway's state carrier rides in tool-call ids and comes back out of the next request."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    StreamError,
    StreamOptions,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    Usage,
    UserMessage,
    stream,
)
from stream_core.provider import CARRIER_PREFIX, RequestFieldError, dialect, get_provider
from stream_core.testing import faux_model, replay_client

API = "openai-completions"
CHAT = dialect(API)
WIRE: Any = get_provider(API).wire
FIXTURES = Path(__file__).parents[2] / "contract_tests" / "fixtures" / API
READER = Model(id="m", api=API, provider="openai", base_url="http://upstream.test/v1")

# --- helpers ----------------------------------------------------------------------------------


async def encode(
    message: AssistantMessage, carrier: Any = None, chunk: int = 3
) -> tuple[AssistantMessage, bytes]:
    """`message` streamed by a faux model (in deltas of `chunk` characters), each event
    fed to the encoder as it comes: (the streamed message, the encoder's bytes)."""
    model = faux_model([message], chunk_size=chunk)
    encoder = CHAT.encoder("client-model", carrier)
    out = b""
    async with stream(model, Context(messages=[UserMessage(content="hi")])) as s:
        async for event in s:
            out += encoder.feed(event)
        final = await s.result()
    return final, out


async def read(body: bytes | Path, status: int = 200, media: str = "text/event-stream") -> Any:
    """The provider's reading of a body (its translator, or its whole-answer reader)."""
    client = replay_client(body, status=status, headers={"content-type": media})
    opts = StreamOptions(client=client, api_key="k", max_retries=0)
    async with stream(READER, Context(messages=[UserMessage(content="hi")]), opts) as s:
        return await s.result()


async def relay(path: Path) -> tuple[AssistantMessage, bytes]:
    """A recording read by the provider, its events encoded as they arrive."""
    encoder = CHAT.encoder("client-model", None)
    out = b""
    opts = StreamOptions(client=replay_client(path), api_key="k", max_retries=0)
    async with stream(READER, Context(messages=[UserMessage(content="hi")]), opts) as s:
        async for event in s:
            out += encoder.feed(event)
        return await s.result(), out


UNSAID = ("server_tool_call", "server_tool_result")  # no Chat Completions field for them


def shape(m: AssistantMessage, *, signatures: bool = True) -> dict[str, Any]:
    """What must survive: blocks (citations without the vendor's raw record, which becomes
    a `url_citation`), usage, stop reason, error kind and text."""
    content = []
    for b in m.content:
        d = b.model_dump(mode="json")
        if d["type"] in UNSAID:
            continue
        if d.get("citations"):
            d["citations"] = [{k: v for k, v in c.items() if k != "raw"} for c in d["citations"]]
        if d["type"] == "thinking" and not signatures:
            d.pop("signature")
        content.append(d)
    usage = m.usage.model_dump(exclude={"cost"})
    error = (m.error.kind, m.error.message) if m.error else None
    return {"content": content, "usage": usage, "stop": m.stop_reason, "error": error}


def sse_events(body: bytes) -> list[Any]:
    out = []
    for block in body.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


# --- the encoder, read back by the provider -----------------------------------------------------


def msg(*content: Any, stop: Any = "stop", usage: Usage | None = None, **kw: Any) -> Any:
    return AssistantMessage(
        api="faux", provider="faux", model="faux", content=list(content), stop_reason=stop,
        usage=usage or Usage(input=11, output=7), **kw,
    )  # fmt: skip


SCRIPTS = {
    "text": msg(
        TextContent(text="Hello, world \u2028 \u00e9\U0001f600."),
        usage=Usage(input=10, output=5, cache_read=30, cache_write=4),
    ),
    "thinking-tools": msg(
        ThinkingContent(thinking="Let me look both up.", signature="opaque-sig"),
        TextContent(text="Looking."),
        ToolCall(id="call_a", name="look", arguments={"q": "one", "n": [1, 2]}),
        ToolCall(id="toolu_b", name="find", arguments={}),
        stop="tool_use",
        usage=Usage(input=120, output=40, reasoning=12, cache_read=8),
    ),
    "interleaved": msg(
        TextContent(text="First."),
        ToolCall(id="c1", name="a", arguments={"x": 1}),
        TextContent(text="Then."),
        ToolCall(id="c2", name="b", arguments={"y": "z"}),
        stop="tool_use",
    ),
    "length-cut-call": msg(
        TextContent(text="Writing"),
        ToolCall(id="c1", name="write", truncated=True, partial_json='{"body": "Revenue gr'),
        stop="length",
    ),
    "citations": msg(
        TextContent(text="Searching. "),
        ToolCall(id="c1", name="note", arguments={}),
        TextContent(
            text="Paris is the capital.",
            citations=[
                Citation(url="https://a.example/p", title="A", start=0, end=5),
                Citation(url="https://b.example/", title="B"),
                # A Responses upstream's annotation (flat): said in Chat's shape.
                Citation(
                    url="https://c.example/",
                    title="C",
                    start=6,
                    end=8,
                    raw={
                        "type": "url_citation",
                        "url": "https://c.example/",
                        "title": "C",
                        "start_index": 6,
                        "end_index": 8,
                    },
                ),
            ],
        ),
        stop="tool_use",
        usage=Usage(input=5, output=9, server_tools={"web_search": 2}),
    ),
    "overloaded-after-text": msg(
        TextContent(text="Half an ans"),
        stop="error",
        error=StreamError(kind="overloaded", message="upstream overloaded"),
        usage=Usage(input=3, output=2),
    ),
    "content-filter": msg(
        TextContent(text="Some"),
        stop="error",
        error=StreamError(kind="content_filter", message="the model stopped: content_filter"),
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(SCRIPTS))
async def test_faux_turns_read_back_through_the_translator(name: str) -> None:
    sent, body = await encode(SCRIPTS[name])
    back = await read(body)
    assert shape(back, signatures=False) == shape(sent, signatures=False)
    assert back.response_id == sent.response_id or sent.response_id is None
    if name == "thinking-tools":
        # Reasoning as DeepSeek's field; ids as the upstream gave them.
        assert back.content[0].signature == "reasoning_content"
        assert [b.id for b in back.content[2:]] == ["call_a", "toolu_b"]


@pytest.mark.anyio
async def test_the_chunks_are_what_an_openai_server_sends() -> None:
    _, body = await encode(SCRIPTS["thinking-tools"], chunk=100)
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    first, usage = events[0], events[-2]
    assert first["object"] == "chat.completion.chunk" and first["model"] == "client-model"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len({e["id"] for e in events[:-1]}) == 1
    heads = [
        tc for e in events[1:-2] for tc in e["choices"][0]["delta"].get("tool_calls", [])
        if "id" in tc
    ]  # fmt: skip
    assert [(h["index"], h["id"], h["type"], h["function"]["name"]) for h in heads] == [
        (0, "call_a", "function", "look"),
        (1, "toolu_b", "function", "find"),
    ]
    assert events[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": 128,  # OpenAI counts cached input in the prompt
        "completion_tokens": 40,
        "total_tokens": 168,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }


FIXTURE_BODIES = sorted(FIXTURES.glob("*.body"))


@pytest.mark.anyio
@pytest.mark.parametrize("path", FIXTURE_BODIES, ids=lambda p: p.stem)
async def test_recordings_relayed_read_back_the_same(path: Path) -> None:
    """Every openai-completions recording: the provider's events, encoded as they arrive,
    read back to the same message (a server-run tool, which the dialect has no field for,
    aside), the reasoning field and the server's stop word kept."""
    original, body = await relay(path)
    back = await read(body)
    assert shape(back) == shape(original)
    assert back.raw_stop_reason == original.raw_stop_reason
    if original.response_id is not None:
        assert back.response_id == original.response_id


# --- the official SDK accumulates the same message ------------------------------------------------


def sdk_client(body: bytes, seen: list[dict[str, Any]] | None = None) -> Any:
    openai = pytest.importorskip("openai")

    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = httpx.MockTransport(answer)
    return openai.OpenAI(
        base_url="http://gateway.test/v1", api_key="k", max_retries=0,
        http_client=httpx.Client(transport=transport),
    )  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["text", "thinking-tools", "interleaved", "citations"])
async def test_the_openai_sdk_accumulates_the_non_streamed_body(name: str) -> None:
    """`client.chat.completions.stream(...)` (ChatCompletionStreamState) over the encoder's
    bytes gives the message `message_body` writes for the same answer."""
    sent, body = await encode(SCRIPTS[name])
    with sdk_client(body) as client:
        with client.chat.completions.stream(model="client-model", messages=ASK) as s:
            final = s.get_final_completion()
    whole = CHAT.message_body(sent, "client-model", None)
    got = final.choices[0].message.to_dict()
    want = whole["choices"][0]["message"]
    for key in ("content", "reasoning_content", "annotations"):
        assert got.get(key) == want.get(key), key
    calls = [(c["id"], c["function"]["name"], c["function"]["arguments"])
             for c in got.get("tool_calls") or []]  # fmt: skip
    assert [(c[0], c[1], json.loads(c[2])) for c in calls] == [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in want.get("tool_calls") or []
    ]
    assert final.choices[0].finish_reason == whole["choices"][0]["finish_reason"]
    assert final.usage.to_dict() == whole["usage"]
    assert final.id.startswith("chatcmpl-") and final.model == "client-model"


ASK = [{"role": "user", "content": "hi"}]


@pytest.mark.anyio
async def test_an_error_after_content_raises_in_the_sdk_with_the_kind_it_reads() -> None:
    openai = pytest.importorskip("openai")
    _, body = await encode(SCRIPTS["overloaded-after-text"])
    with sdk_client(body) as client:
        with pytest.raises(openai.APIError) as caught:
            with client.chat.completions.stream(model="client-model", messages=ASK) as s:
                s.get_final_completion()
    assert caught.value.body["type"] == "service_unavailable"
    assert "upstream overloaded" in caught.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["text", "thinking-tools", "citations", "length-cut-call"])
async def test_the_non_streamed_body_reads_back_through_the_provider(name: str) -> None:
    sent, _ = await encode(SCRIPTS[name])
    body = json.dumps(CHAT.message_body(sent, "client-model", None)).encode()
    back = await read(body, media="application/json")
    want = shape(sent, signatures=False)
    texts = [b for b in want["content"] if b["type"] == "text"]
    if len(texts) > 1:  # one `content` string: the text blocks as one, spans counted in it
        at, cited = 0, []
        for t in texts:
            for c in t.get("citations") or []:
                cited.append(
                    {**c, "start": c["start"] + at, "end": c["end"] + at} if "start" in c else c
                )
            at += len(t["text"])
        merged = {**texts[0], "text": "".join(t["text"] for t in texts), "citations": cited}
        rest = [b for b in want["content"] if b["type"] != "text"]
        want["content"] = [merged, *rest]
    if name == "length-cut-call":  # a whole body carries the parsed part of a cut call
        want["content"][-1]["arguments"] = back.content[-1].arguments
    assert shape(back, signatures=False) == want


# --- errors -------------------------------------------------------------------------------------

KINDS = [
    "auth", "rate_limit", "overloaded", "context_overflow", "invalid_request", "not_found",
    "server", "network", "timeout", "refusal", "content_filter", "aborted", "protocol",
    "invalid_output", "budget",
]  # fmt: skip
READ_OVER_HTTP = {
    "budget": "rate_limit",
    "refusal": "invalid_request",
    "network": "server",
    "protocol": "server",
    "aborted": "server",
    "invalid_output": "server",
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_an_error_before_content_reads_back_over_http(kind: str) -> None:
    status, payload = CHAT.error_body(kind, "it went wrong")  # type: ignore[arg-type]
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    back = await read(json.dumps(payload).encode(), status=status, media="application/json")
    assert back.error is not None and back.error.kind == READ_OVER_HTTP.get(kind, kind)
    assert back.error.status_code == status


def test_the_statuses_openai_clients_expect() -> None:
    kinds = ("rate_limit", "context_overflow", "auth", "server", "overloaded", "invalid_request")
    said = {k: CHAT.error_body(k, "m") for k in kinds}  # type: ignore[arg-type]
    assert said["rate_limit"][0] == 429
    assert said["rate_limit"][1]["error"]["code"] == "rate_limit_exceeded"
    assert said["context_overflow"][0] == 400
    assert said["context_overflow"][1]["error"]["type"] == "invalid_request_error"
    assert said["context_overflow"][1]["error"]["code"] == "context_length_exceeded"
    assert said["auth"][0] == 401 and said["server"][0] == 500 and said["overloaded"][0] == 503
    assert said["invalid_request"][1]["error"]["type"] == "invalid_request_error"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_an_error_after_content_reads_back_as_its_kind(kind: str) -> None:
    sent = msg(TextContent(text="Partial"), stop="error", usage=Usage(input=4, output=1),
               error=StreamError(kind=kind, message="it broke midway"))  # type: ignore[arg-type]  # fmt: skip
    streamed, body = await encode(sent)
    back = await read(body)
    assert back.error is not None
    assert back.error.kind == kind
    assert back.content[0].text == "Partial"
    assert back.usage == streamed.usage


# --- the state carrier ----------------------------------------------------------------------------


def carrier(message: AssistantMessage) -> str:
    calls = sum(isinstance(b, ToolCall) for b in message.content)
    return f"{CARRIER_PREFIX}state-{calls}"


@pytest.mark.anyio
async def test_a_carrier_rides_in_the_tool_call_ids_and_comes_back_out() -> None:
    """Each call is sent whole at its end, its id carrying the state; the SDK sends the
    ids back in its next request, which parses to the short ids and the carrier of the
    last call (packed with every call before it) for that assistant message."""
    sent, body = await encode(SCRIPTS["thinking-tools"], carrier=carrier)
    calls = [tc for e in sse_events(body)[:-1] if e.get("choices")
             for tc in e["choices"][0]["delta"].get("tool_calls", [])]  # fmt: skip
    assert [c["id"] for c in calls] == [f"call_a~{CARRIER_PREFIX}state-1",
                                        f"toolu_b~{CARRIER_PREFIX}state-2"]  # fmt: skip
    assert json.loads(calls[0]["function"]["arguments"]) == {"q": "one", "n": [1, 2]}
    seen: list[dict[str, Any]] = []
    with sdk_client(body, seen) as client:
        with client.chat.completions.stream(model="client-model", messages=ASK) as s:
            final = s.get_final_completion()
        answer = final.choices[0].message
        results = [{"role": "tool", "tool_call_id": c.id, "content": f"result {n}"}
                   for n, c in enumerate(answer.tool_calls)]  # fmt: skip
        with client.chat.completions.stream(
            model="client-model", messages=[*ASK, answer, *results]
        ) as s:
            s.get_final_completion()
    inbound = CHAT.parse_request(seen[1], {})
    assert inbound.carriers == {1: f"{CARRIER_PREFIX}state-2"}
    replayed: Any = inbound.context.messages[1]
    assert [b.id for b in replayed.content if isinstance(b, ToolCall)] == ["call_a", "toolu_b"]
    tool_results = inbound.context.messages[2:]
    assert [(m.tool_call_id, m.tool_name) for m in tool_results] == [  # type: ignore[union-attr]
        ("call_a", "look"), ("toolu_b", "find")]  # fmt: skip
    # The non-streamed body carries it the same way, on every call.
    whole = CHAT.message_body(sent, "client-model", carrier)
    ids = [c["id"] for c in whole["choices"][0]["message"]["tool_calls"]]
    assert ids == [f"call_a~{CARRIER_PREFIX}state-2", f"toolu_b~{CARRIER_PREFIX}state-2"]


@pytest.mark.anyio
async def test_without_a_carrier_string_the_ids_stay_as_they_were() -> None:
    _, body = await encode(SCRIPTS["thinking-tools"], carrier=lambda m: None)
    back = await read(body)
    assert [b.id for b in back.content if isinstance(b, ToolCall)] == ["call_a", "toolu_b"]


# --- the request parser: the builder's inverse ----------------------------------------------------

GPT = Model(id="gpt-5", api=API, provider="openai", base_url="https://api.openai.com/v1",
            reasoning=True, input=["text", "image"])  # fmt: skip
DEEPSEEK = Model(id="deepseek-chat", api=API, provider="deepseek",
                 base_url="https://api.deepseek.com", input=["text", "image"])  # fmt: skip
VLLM = Model(id="qwen3", api=API, provider="vllm", base_url="http://localhost:8000/v1",
             input=["text", "image"])  # fmt: skip
RESERVED = ("(", "Error", "Attached", "Answer with one JSON")
TEXT = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12).filter(
    lambda s: bool(s.strip()) and not s.startswith(RESERVED)
)
DATA = st.binary(min_size=1, max_size=9).map(lambda b: base64.b64encode(b).decode())
NAMES = st.sampled_from(["get_weather", "look", "find"])
ARGS = st.dictionaries(
    st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=4),
    st.integers(-9, 9) | TEXT | st.booleans() | st.none() | st.lists(st.integers(0, 3), max_size=2),
    max_size=3,
)
IMAGE = DATA.map(lambda d: ImageContent(data=d, mime_type="image/png"))
PDF = st.builds(lambda d, n: FileContent(data=d, mime_type="application/pdf", name=n), DATA, TEXT)
UPLOADED = st.builds(lambda i: FileContent(file_id=f"file-{i}"), st.integers(0, 99))
USER = TEXT.map(lambda t: UserMessage(content=t)) | st.lists(
    TEXT.map(lambda t: TextContent(text=t)) | IMAGE | PDF | UPLOADED, min_size=1, max_size=3
).map(lambda parts: UserMessage(content=list(parts)))
SCHEMA = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.just({"x": {"type": "string"}})},
    optional={"title": st.sampled_from(["Answer", "weather report"]), "description": TEXT},
)


@st.composite
def conversations(draw: Any) -> Context:
    messages: list[Any] = []
    calls_made = 0
    for _ in range(draw(st.integers(1, 3))):
        messages.append(draw(USER))
        if not draw(st.booleans()):
            continue
        text = draw(st.none() | TEXT)
        n = draw(st.integers(0 if text else 1, 3))
        calls = [ToolCall(id=f"call_{calls_made + j}", name=draw(NAMES), arguments=draw(ARGS))
                 for j in range(n)]  # fmt: skip
        calls_made += n
        blocks: list[Any] = [TextContent(text=text)] if text else []
        messages.append(AssistantMessage(api=API, provider="client", model="client",
                                         content=blocks + calls,
                                         stop_reason="tool_use" if calls else "stop"))  # fmt: skip
        for j, call in enumerate(calls):
            content: list[Any] = draw(st.lists(TEXT.map(lambda t: TextContent(text=t)), max_size=1))
            if j == n - 1:  # the builder's one note holds the run's images: the last result's
                content += draw(st.lists(IMAGE | PDF, max_size=2))
            failed = draw(st.booleans())
            messages.append(ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                                              content=content, is_error=failed))  # fmt: skip
    tools = [Tool(name=n, description=draw(st.just("") | TEXT)) for n in ("get_weather", "look")]
    return Context(system_prompt=draw(st.none() | TEXT), messages=messages,
                   tools=tools if draw(st.booleans()) else None)  # fmt: skip


def options_for(draw: Any, context: Context) -> dict[str, Any]:
    floats = st.floats(0, 1, allow_nan=False)
    values = {
        "max_tokens": st.integers(1, 10**6), "temperature": st.floats(0, 2, allow_nan=False),
        "top_p": floats, "stop": st.lists(TEXT, min_size=1, max_size=4),
        "seed": st.integers(-(2**31), 2**31), "presence_penalty": floats,
        "frequency_penalty": floats, "reasoning": st.sampled_from(["low", "medium", "high"]),
        "session_id": st.from_regex(r"\Asess-[a-z0-9]{1,8}\Z"), "output_schema": SCHEMA,
        "top_k": st.integers(1, 100),
    }  # fmt: skip
    if context.tools:
        values["tool_choice"] = st.sampled_from(["auto", "none", "required", {"tool": "look"}])
        values["parallel_tool_calls"] = st.booleans()
    return {k: v for k, s in values.items() if (v := draw(st.none() | s)) is not None}


def dump(value: Any) -> Any:
    """JSON without timestamps (made when a message is)."""
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value


# What each model's compat row leaves out of its request: not read back.
UNSENT = {"gpt-5": {"top_k"}, "deepseek-chat": {"reasoning", "session_id"},
          "qwen3": {"reasoning", "session_id"}}  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), conversations(), st.sampled_from([GPT, DEEPSEEK, VLLM]))
def test_a_built_request_parses_back_to_its_context_and_options(
    data: Any, context: Context, model: Model
) -> None:
    values = options_for(data.draw, context)
    if model is not VLLM:
        values.pop("top_k", None)
    built = WIRE.build_request(model, context, StreamOptions(**values)).payload
    inbound = CHAT.parse_request(json.loads(json.dumps(built)), {})
    assert inbound.model == model.id and inbound.stream is True
    assert dump(inbound.context.model_dump(mode="json")) == dump(context.model_dump(mode="json"))
    for name in ("max_tokens", "temperature", "top_p", "stop", "seed", "presence_penalty",
                 "frequency_penalty", "reasoning", "session_id", "output_schema", "top_k",
                 "tool_choice", "parallel_tool_calls"):  # fmt: skip
        want = None if name in UNSENT[model.id] else values.get(name)
        assert getattr(inbound.options, name) == want, name
    assert inbound.unmodeled == {"stream_options": {"include_usage": True}}
    assert inbound.carriers == {}


def test_system_and_developer_messages_join_in_order() -> None:
    body = {"model": "m", "messages": [
        {"role": "system", "content": "One."},
        {"role": "user", "content": "hi"},
        {"role": "developer", "content": [{"type": "text", "text": "Two."},
                                          {"type": "text", "text": "Three."}]},
    ]}  # fmt: skip
    inbound = CHAT.parse_request(body, {})
    assert inbound.context.system_prompt == "One.\n\nTwo.\n\nThree."
    assert [m.role for m in inbound.context.messages] == ["user"]


def test_what_a_client_sends_beyond_the_builder() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://x.example/a.jpg",
                                                    "detail": "high"}},
                {"type": "input_audio", "input_audio": {"data": "AAA=", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1", "filename": "r.pdf"}},
            ]},
            {"role": "assistant", "content": None, "reasoning_content": "Hm.",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "f", "arguments": "{\"a\": "}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
        ],
        "max_tokens": 50, "max_completion_tokens": 70, "stop": "END",
        "reasoning_effort": "none", "response_format": {"type": "json_object"},
        "user": "u-1", "n": 1, "logprobs": False,
    }  # fmt: skip
    inbound = CHAT.parse_request(body, {})
    user, assistant, result = inbound.context.messages  # type: Any, Any, Any
    assert user.content == [
        FileContent(url="https://x.example/a.jpg", mime_type="image/jpeg"),
        FileContent(data="AAA=", mime_type="audio/wav"),
        FileContent(file_id="file-1", name="r.pdf"),
    ]
    assert assistant.content[0] == ThinkingContent(thinking="Hm.", signature="reasoning_content")
    assert assistant.content[1].truncated  # a cut call, never run
    assert result.tool_name == "f" and result.content == [TextContent(text="ok")]
    assert inbound.options.max_tokens == 70 and inbound.options.stop == ["END"]
    assert inbound.options.reasoning is None
    assert inbound.options.output_schema == {"type": "object"}  # JSON mode: any object
    assert inbound.unmodeled == {"user": "u-1", "n": 1, "logprobs": False}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png,abc"}}]}]},
         "messages[0].content[0].image_url.url"),
        ({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
            {"id": "c", "function": {"arguments": "{}"}}]}]},
         "messages[0].tool_calls[0].function.name"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
         "temperature"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 3},
         "top_p"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}],
          "reasoning_effort": "max"}, "reasoning_effort"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}],
          "tools": [{"type": "function", "function": {"name": "f"}}],
          "tool_choice": {"type": "function"}}, "tool_choice.function.name"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}],
          "tool_choice": "required"}, "tool_choice"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}],
          "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
         "response_format.json_schema.schema"),
    ],
)  # fmt: skip
def test_a_field_that_cannot_be_read_is_named(body: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestFieldError) as caught:
        CHAT.parse_request(body, {})
    assert caught.value.field == field


@pytest.mark.anyio
async def test_a_call_named_after_its_first_arguments_is_sent_once_named() -> None:
    """The live message may learn a call's name after its first argument fragment: the
    fragments wait, so the first chunk names the call and no fragment is lost."""
    call = ToolCall(id="call_late", name="")
    live = msg(call, stop="tool_use")
    encoder = CHAT.encoder("client-model", None)
    body = encoder.feed(MessageStart(live))
    body += encoder.feed(MessageUpdate(live, ToolCallStart(0)))
    body += encoder.feed(MessageUpdate(live, ToolCallDelta(0, '{"a": ')))
    call.name = "late"
    body += encoder.feed(MessageUpdate(live, ToolCallDelta(0, "1}")))
    call.arguments = {"a": 1}
    body += encoder.feed(MessageUpdate(live, ToolCallEnd(0)))
    body += encoder.feed(MessageEnd(live))
    back = await read(body)
    assert [(b.id, b.name, b.arguments) for b in back.content] == [("call_late", "late", {"a": 1})]


def test_a_lone_surrogate_from_upstream_is_escaped_not_a_crash() -> None:
    live = msg(TextContent(text="a\ud800b"), ThinkingContent(thinking="\udfff"))
    encoder = CHAT.encoder("client-model", None)
    body = encoder.feed(MessageStart(live))
    body += encoder.feed(MessageUpdate(live, TextDelta(0, "a\ud800b")))
    body += encoder.feed(MessageUpdate(live, ThinkingDelta(1, "\udfff")))
    body += encoder.feed(MessageEnd(live))
    chunks = sse_events(body)
    assert chunks[1]["choices"][0]["delta"] == {"content": "a\ud800b"}
    assert chunks[2]["choices"][0]["delta"] == {"reasoning_content": "\udfff"}
