"""More breakages users of translating proxies report (../shared/reference/peers.md, the
peer survey's pains list, and pi-ai's cross-vendor cases), those a gateway meets, each as a
test named for the pain, from the client's side. See `test_pains.py` for the issue's own
list."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from matrix_clients import Ask  # noqa: E402
from matrix_support import Matrix, run_cell, upstream  # noqa: E402
from pains_support import (  # noqa: E402
    CLAUDE_SIG,
    DIALECTS,
    SHORT,
    UPSTREAMS,
    access_line,
    call,
    converse,
    gateway,
    msg,
    read_stream,
    slow,
    vendor_says,
)

from stream_core import AssistantMessage, TextContent, ThinkingContent, ToolCall  # noqa: E402
from stream_core.gateway import GatewayConfig, Upstream  # noqa: E402
from stream_core.testing import ANY_MODEL, Synthesized, fake_vendor  # noqa: E402


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    yield from gateway(tmp_path_factory)


STOP_WORDS = {"anthropic-messages": "tool_use", "openai-completions": "tool_calls",
              "openai-responses": "completed"}  # fmt: skip


@slow
@pytest.mark.parametrize("api", ["ollama-chat", "google-generative-ai", "openai-responses"])
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_a_tool_call_reported_as_end_turn_is_dropped(
    matrix: Matrix, dialect: str, api: str
) -> None:
    """LiteLLM #34692 (Ollama streamed to /v1/messages said `end_turn`, so Claude Code
    dropped the call), #12249 / #12481 (Gemini, Ollama): vendors that end a call with a
    plain stop. The client's stop reason says there are calls to run."""
    spec, override = UPSTREAMS[api]
    turns = [msg(call("call_1", "Paris"), stop="tool_use"), msg(TextContent(text="Sunny."))]
    readings, _ = converse(matrix, dialect, spec, turns, Ask(tools=True), api=override)
    assert readings[0].form["stop"] == STOP_WORDS[dialect]
    assert [args for _, args in readings[0].calls] == [{"city": "Paris"}]


@slow
@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages", "google-generative-ai"])
def test_parallel_tool_calls_collide_on_index(matrix: Matrix, api: str) -> None:
    """LiteLLM #21331 (the Responses-to-Chat bridge put every parallel call at index 0),
    #5231, any-llm #970: a Chat Completions client keys a call's deltas by `index`; two
    calls of one answer have two indexes, one id and one name each."""
    spec, override = UPSTREAMS[api]
    script = msg(call("call_1", "Paris"), call("call_2", "Rome"), stop="tool_use")
    model = Upstream(spec, api=override).resolve()
    path, _ = vendor_says(script, model, matrix.folder / f"pain{matrix.n + 1}")
    client = matrix.clients["openai-completions"]
    with fake_vendor(scenarios={ANY_MODEL: [path]}) as fake:
        name = matrix.name()
        matrix.serve(GatewayConfig(models={name: upstream(spec, override, fake.url)}))
        kw = client._kwargs(name, client.start(), Ask(tools=True))
        with client.sdk.chat.completions.create(stream=True, **kw) as chunks:
            deltas = [
                c for chunk in chunks for ch in chunk.choices for c in ch.delta.tool_calls or ()
            ]
    by_index: dict[int, dict[str, str]] = {}
    for d in deltas:
        seen = by_index.setdefault(d.index, {"id": "", "name": "", "args": ""})
        seen["id"] += d.id or ""
        seen["name"] += d.function.name or "" if d.function else ""
        seen["args"] += d.function.arguments or "" if d.function else ""
    assert sorted(by_index) == [0, 1]
    assert [v["name"] for v in by_index.values()] == ["get_weather"] * 2
    assert [json.loads(v["args"]) for v in by_index.values()] == [
        {"city": "Paris"},
        {"city": "Rome"},
    ]
    assert len({v["id"] for v in by_index.values()}) == 2


CUT = {"anthropic-messages": "max_tokens", "openai-completions": "length",
       "openai-responses": "incomplete:max_output_tokens"}  # fmt: skip


@slow
@pytest.mark.parametrize("api", ["anthropic-messages", "openai-completions", "openai-responses"])
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_a_truncated_tool_call_reported_as_complete(matrix: Matrix, dialect: str, api: str) -> None:
    """hermes-agent #7693 (routers rewrite `length` to `tool_calls`), omlx #2817 (the
    Responses API said `completed` on a length stop): a call cut by the output limit is
    said to be cut, in the dialect's words, never a call to run."""
    spec, override = UPSTREAMS[api]
    cut = ToolCall(id="call_1", name="get_weather", arguments={}, partial_json='{"city": "Par',
                   truncated=True)  # fmt: skip
    turns = [msg(TextContent(text="Let me check."), cut, stop="length")]
    (got,), _ = converse(matrix, dialect, spec, turns, Ask(tools=True, max_tokens=64), api=override)
    assert got.form["stop"] == CUT[dialect]
    assert [c[0] for c in got.form["content"]] == ["text", "tool-cut"]


@slow
@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses", "google-generative-ai"])
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_mid_stream_overloaded_error_truncates_the_turn_silently(
    matrix: Matrix, dialect: str, api: str
) -> None:
    """anthropic-sdk-python #688 / #1918, agent-os #2118: an upstream that fails after the
    first text. The client reads the text, then an error of its dialect (Anthropic:
    `overloaded_error`), never a turn that looks finished."""
    spec, override = UPSTREAMS[api]
    broken = AssistantMessage.model_validate(
        {"api": "faux", "provider": "faux", "model": "m",
         "content": [TextContent(text="Paris is")], "stop_reason": "error",
         "error": {"kind": "overloaded", "message": "the upstream is overloaded"}}
    )  # fmt: skip
    model = Upstream(spec, api=override).resolve()
    path, _ = vendor_says(broken, model, matrix.folder / f"pain{matrix.n + 1}")
    client = matrix.clients[dialect]
    with fake_vendor(scenarios={ANY_MODEL: [path] * 4}) as fake:
        name = matrix.name()
        matrix.serve(GatewayConfig(models={name: upstream(spec, override, fake.url)}))
        texts, error = read_stream(client, name, Ask())
    assert "".join(texts) == "Paris is"
    assert error is not None, "the stream ended as if the answer were whole"
    if dialect == "anthropic-messages":
        assert isinstance(error, anthropic.APIStatusError)
        assert error.body["error"]["type"] == "overloaded_error", error.body  # type: ignore[index]


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_naive_retry_replays_content(matrix: Matrix, dialect: str) -> None:
    """open-interpreter #291, LiteLLM #6957 / #29808: a stream that fails after content
    is not retried, nor handed to the route's next deployment: the client never gets the
    same text twice (or another model's answer glued on); before content it falls over."""
    spec = "anthropic/claude-sonnet-4-5"
    model = Upstream(spec).resolve()
    folder = matrix.folder / f"pain{matrix.n + 1}"
    whole = vendor_says(msg(TextContent(text="Paris is sunny and warm today.")), model, folder)[1]
    frames = whole.body.split(b"\n\n")
    at = next(i for i, f in enumerate(frames) if b"content_block_delta" in f)
    cut = Synthesized(b"\n\n".join(frames[: at + 1]) + b"\n\n", whole.meta)  # then EOF
    first = cut.write(folder / "cut")
    second = vendor_says(msg(TextContent(text="Other deployment.")), model, folder / "b")[0]
    client = matrix.clients[dialect]
    with (
        fake_vendor(scenarios={ANY_MODEL: [first]}) as a,
        fake_vendor(scenarios={ANY_MODEL: [second]}) as b,
    ):
        name = matrix.name()
        route = [upstream(spec, None, a.url), upstream(spec, None, b.url)]
        matrix.serve(GatewayConfig(models={name: f"route:{name}"}, routes={name: route}))
        texts, error = read_stream(client, name, Ask())
        asked = (len(a.requests), len(b.requests))
    assert asked == (1, 0), f"after content, the route asked again: {asked}"
    assert "".join(texts) == "Paris is sunny and warm today."
    assert error is not None, "the cut stream ended as if the answer were whole"


@slow
@pytest.mark.parametrize("api", ["anthropic-messages", "google-generative-ai"])
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_sse_buffered_by_gzip(matrix: Matrix, dialect: str, api: str) -> None:
    """anthropic-sdk-ruby #182, claude-relay-service #1039: a compressed event stream
    arrives all at once (or broken). The SDKs ask for gzip; the gateway's stream is sent
    uncompressed, and it asks its upstream for an uncompressed one too."""
    spec, override = UPSTREAMS[api]
    model = Upstream(spec, api=override).resolve()
    path, _ = vendor_says(msg(TextContent(text="Sunny.")), model, matrix.folder / f"p{matrix.n}")
    client = matrix.clients[dialect]
    with fake_vendor(scenarios={ANY_MODEL: [path]}) as fake:
        name = matrix.name()
        matrix.serve(GatewayConfig(models={name: upstream(spec, override, fake.url)}))
        kw = client._kwargs(name, client.start(), Ask())
        sdk = client.sdk
        if dialect == "anthropic-messages":
            create = sdk.messages.with_streaming_response.create
        elif dialect == "openai-responses":
            create = sdk.responses.with_streaming_response.create
        else:
            create = sdk.chat.completions.with_streaming_response.create
        with create(stream=True, **kw) as response:
            asked = response.http_request.headers.get("accept-encoding", "")
            coding = response.headers.get("content-encoding")
            media = response.headers["content-type"]
            body = b"".join(response.iter_bytes())
        (sent,) = fake.requests
    assert "gzip" in asked  # what the SDK asks for
    assert coding in (None, "identity") and media.startswith("text/event-stream")
    assert b"Sunny." in body
    assert sent.headers.get("accept-encoding") == "identity"


@slow
@pytest.mark.parametrize("api", ["anthropic-messages", "google-generative-ai"])
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_cancellation_does_not_stop_upstream_generation(
    matrix: Matrix, dialect: str, api: str
) -> None:
    """LiteLLM #17364 / #3341: the client stops reading and closes its stream; the
    gateway closes its upstream connection (no tokens paid for nobody). The matrix's
    cancel cell: an upstream that streams without end."""
    run_cell(matrix, "cancel mid-stream", dialect, api)


@slow
@pytest.mark.parametrize("api", ["anthropic-messages", "google-generative-ai"])
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_no_fallback_when_streaming(matrix: Matrix, dialect: str, api: str) -> None:
    """LiteLLM #6957 / #19077: a streamed request whose first deployment answers 429
    falls over to the route's next one; with none left, a 429 with `retry-after` in the
    client's dialect. The matrix's fall-over cell."""
    run_cell(matrix, "429 falls over", dialect, api)


@slow
@pytest.mark.parametrize("api", ["openai-completions", "anthropic-messages"])
def test_streaming_usage_missing_unless_opted_in(
    matrix: Matrix, api: str, caplog: pytest.LogCaptureFixture
) -> None:
    """LiteLLM #23847 / #5632: a Chat Completions client that does not set
    `stream_options.include_usage` still gets its call counted (quotas, budgets, the
    access log): the gateway asks its upstream for usage itself."""
    spec, override = UPSTREAMS[api]
    model = Upstream(spec, api=override).resolve()
    path, _ = vendor_says(msg(TextContent(text="Sunny.")), model, matrix.folder / f"p{matrix.n}")
    client = matrix.clients["openai-completions"]
    with fake_vendor(scenarios={ANY_MODEL: [path]}) as fake:
        name = matrix.name()
        matrix.serve(GatewayConfig(models={name: upstream(spec, override, fake.url)}))
        kw = client._kwargs(name, client.start(), Ask())
        assert "stream_options" not in kw
        caplog.set_level("INFO", logger="stream_core.gateway.access")
        with client.sdk.chat.completions.create(stream=True, **kw) as chunks:
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        (sent,) = fake.requests
    assert text == "Sunny."
    if api == "openai-completions":
        assert sent.body["stream_options"] == {"include_usage": True}
    line = access_line(caplog, name)
    assert "in=120 out=30 cache_read=40 cache_write=20" in line, line


@slow
def test_anthropic_reasoning_as_empty_output_text_in_the_responses_bridge(matrix: Matrix) -> None:
    """LiteLLM #11302: Claude's thinking reached Responses clients as empty `output_text`
    deltas. Through the gateway it is a reasoning item whose summary says it, the answer
    a message item after it, and no empty delta."""
    spec = "anthropic/claude-sonnet-4-5"
    model = Upstream(spec).resolve()
    script = msg(ThinkingContent(thinking="Paris: sunny season.", signature=CLAUDE_SIG),
                 TextContent(text="Sunny."))  # fmt: skip
    path, _ = vendor_says(script, model, matrix.folder / f"p{matrix.n}")
    client = matrix.clients["openai-responses"]
    with fake_vendor(scenarios={ANY_MODEL: [path]}) as fake:
        name = matrix.name()
        matrix.serve(GatewayConfig(models={name: upstream(spec, None, fake.url)}))
        kw = client._kwargs(name, client.start(), Ask(thinking=True))
        with client.sdk.responses.create(stream=True, **kw) as events:
            seen = list(events)
    texts = [e.delta for e in seen if e.type == "response.output_text.delta"]
    assert "" not in texts and "".join(texts) == "Sunny."
    summary = [e.delta for e in seen if e.type == "response.reasoning_summary_text.delta"]
    assert "".join(summary) == "Paris: sunny season."
    done = [e for e in seen if e.type == "response.completed"][0].response
    kinds = [i.type for i in done.output]
    assert kinds[:2] == ["reasoning", "message"], kinds


@slow
@pytest.mark.parametrize(
    "api", ["anthropic-messages", "google-generative-ai", "bedrock-converse-stream"]
)
@pytest.mark.parametrize("dialect", DIALECTS[1:], ids=SHORT.get)
def test_tool_call_without_result(matrix: Matrix, dialect: str, api: str) -> None:
    """pi-ai's tool-call-without-result: an app that dropped a call's result (the user
    interrupted it) asks again. OpenAI's APIs let a history say so; Anthropic, Gemini and
    Bedrock refuse a call with no result: each call they get is answered."""
    if dialect == "openai-responses":
        fc = {"type": "function_call", "call_id": "call_lost1", "name": "get_weather",
              "arguments": json.dumps({"city": "Paris"})}  # fmt: skip
        convo: list[Any] = [{"role": "user", "content": "Weather?"}, fc]
    else:
        fn = {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}
        calls = [{"id": "call_lost1", "type": "function", "function": fn}]
        convo = [{"role": "user", "content": "Weather?"},
                 {"role": "assistant", "content": None, "tool_calls": calls}]  # fmt: skip
    convo.append({"role": "user", "content": "Never mind, just say hi."})
    spec, override = UPSTREAMS[api]
    turns = [msg(TextContent(text="Hi."))]
    converse(matrix, dialect, spec, turns, Ask(tools=True), api=override, convo=convo)


@slow
@pytest.mark.parametrize("api", ["openai-completions", "anthropic-messages", "openai-responses"])
def test_call_id_too_long(matrix: Matrix, api: str) -> None:
    """pi-ai #1022: Copilot's Responses ids (`call_...|fc_...`, 450+ characters) refused
    by the next vendor ("call_id too long"). A Responses client's history reaches each
    vendor with ids it takes (OpenAI Chat: 40 characters; Anthropic: 64 of
    `[A-Za-z0-9_-]`), each result still answering its call."""
    long_id = "call_" + "a1B2" * 20 + "|fc_" + "Zy9x" * 100
    fc = {"type": "function_call", "call_id": long_id, "name": "get_weather",
          "arguments": json.dumps({"city": "Paris"})}  # fmt: skip
    out = {"type": "function_call_output", "call_id": long_id, "output": "Paris: fine"}
    convo = [{"role": "user", "content": "Weather?"}, fc, out]
    spec, override = UPSTREAMS[api]
    turns = [msg(TextContent(text="Fine."))]
    _, (sent,) = converse(matrix, "openai-responses", spec, turns, Ask(tools=True), api=override,
                          convo=convo)  # fmt: skip
    body = sent.body
    if api == "openai-completions":
        (id_,) = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
        assert len(id_) <= 40, id_
    elif api == "anthropic-messages":
        blocks = [b for m in body["messages"] if isinstance(m["content"], list)
                  for b in m["content"]]  # fmt: skip
        (id_,) = [b["id"] for b in blocks if b["type"] == "tool_use"]
        assert len(id_) <= 64 and id_.replace("_", "").replace("-", "").isalnum(), id_
    else:  # the same API: the client's own ids, as it sent them
        assert [i.get("call_id") for i in body["input"] if "call_id" in i] == [long_id] * 2
