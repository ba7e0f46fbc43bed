"""The breakages users of translating proxies report again and again (issue 36; LiteLLM's
proxy, claude-code-router and small bridges; ../shared/reference/peers.md), each as a
test named for the pain, from the client's side: the official SDK against the gateway on
loopback (the fidelity matrix's harness, `matrix_support`), a loopback vendor of the wire
API the pain is about, and what that vendor got on the next request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from matrix_clients import Ask, Failure  # noqa: E402
from matrix_scenarios import http_error  # noqa: E402
from matrix_support import CLIENT_KEY, VENDOR_KEY, Matrix, oracle, upstream  # noqa: E402
from matrix_vendors import problems  # noqa: E402
from pains_support import (  # noqa: E402
    CLAUDE_SIG,
    DIALECTS,
    GEMINI_3,
    SHORT,
    SIGNED,
    UPSTREAMS,
    USAGE,
    call,
    converse,
    edit_for,
    gateway,
    msg,
    slow,
    vendor_says,
)

from stream_core import TextContent, ThinkingContent  # noqa: E402
from stream_core.gateway import GatewayConfig, Upstream  # noqa: E402
from stream_core.testing import ANY_MODEL, fake_vendor  # noqa: E402


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    yield from gateway(tmp_path_factory)


# Every test here but one (Claude Code's Gemini tool loop) is `slow`: the module takes some
# 10 s in all.

SIG = "CiQBmatrixGeminiThoughtSignatureOne=="
SIG_TEXT = "CiQBmatrixGeminiTextPartSignature=="


def gemini_parts(body: dict[str, Any], role: str = "model") -> list[dict[str, Any]]:
    return [p for c in body["contents"] if c["role"] == role for p in c["parts"]]


# --- 1. Gemini `thought_signature` 400 on the second turn ----------------------------------


@pytest.mark.parametrize(
    "dialect",
    [pytest.param(d, id=SHORT[d], marks=[] if d == "anthropic-messages" else [slow])
     for d in DIALECTS],
)  # fmt: skip
def test_gemini_thought_signature_400_on_the_second_turn(matrix: Matrix, dialect: str) -> None:
    """Gemini 3 refuses a function call sent back without the `thoughtSignature` it came
    with. Through the gateway, the second request carries it, exactly, on that part."""
    turns = [
        msg(call("call_1", "Paris", thought_signature=SIG), stop="tool_use"),
        msg(TextContent(text="24 °C and sunny.")),
    ]
    readings, sent = converse(matrix, dialect, GEMINI_3, turns, Ask(tools=True))
    assert [c[1] for c in readings[0].calls] == [{"city": "Paris"}]
    (part,) = [p for p in gemini_parts(sent[1].body) if "functionCall" in p]
    assert part["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}
    assert part["thoughtSignature"] == SIG
    (answer,) = [p for p in gemini_parts(sent[1].body, "user") if "functionResponse" in p]
    assert answer["functionResponse"]["name"] == "get_weather"


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_gemini_thought_signature_400_with_parallel_calls(matrix: Matrix, dialect: str) -> None:
    """Parallel calls: Gemini signs the first call only, and wants the parts back as they
    came: the signature on the first, in its place, none made up for the second."""
    turns = [
        msg(call("call_1", "Paris", thought_signature=SIG), call("call_2", "Rome"),
            stop="tool_use"),
        msg(TextContent(text="Paris 24 °C, Rome 19 °C.")),
    ]  # fmt: skip
    readings, sent = converse(matrix, dialect, GEMINI_3, turns, Ask(tools=True))
    assert [c[1] for c in readings[0].calls] == [{"city": "Paris"}, {"city": "Rome"}]
    parts = [p for p in gemini_parts(sent[1].body) if "functionCall" in p]
    assert [p["functionCall"]["args"] for p in parts] == [{"city": "Paris"}, {"city": "Rome"}]
    assert parts[0]["thoughtSignature"] == SIG
    assert "thoughtSignature" not in parts[1], parts[1]
    answers = [p for p in gemini_parts(sent[1].body, "user") if "functionResponse" in p]
    assert len(answers) == 2


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_gemini_thought_signature_on_a_text_part(matrix: Matrix, dialect: str) -> None:
    """A signature on a text part (the part before a call, or an answer's last part) goes
    back on that text part."""
    turns = [
        msg(TextContent(text="Let me look.", text_signature=SIG_TEXT),
            call("call_1", "Paris", thought_signature=SIG), stop="tool_use"),
        msg(TextContent(text="24 °C and sunny.")),
    ]  # fmt: skip
    _, sent = converse(matrix, dialect, GEMINI_3, turns, Ask(tools=True))
    parts = gemini_parts(sent[1].body)
    assert parts[0] == {"text": "Let me look.", "thoughtSignature": SIG_TEXT}
    assert parts[1]["thoughtSignature"] == SIG


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_gemini_thought_signature_on_an_answers_last_part(matrix: Matrix, dialect: str) -> None:
    """An answer without calls: Gemini signs its last text part (not checked, but
    recommended back). Anthropic and Responses clients carry it back (the state carrier);
    a Chat Completions answer without calls has no field to carry it in (the dialect
    table says so): the text goes back unsigned, which Gemini takes."""
    turns = [
        msg(TextContent(text="Sunny.", text_signature=SIG_TEXT)),
        msg(TextContent(text="Rain.")),
    ]
    _, sent = converse(matrix, dialect, GEMINI_3, turns, Ask(), user="And tomorrow?")
    (part,) = gemini_parts(sent[1].body)
    signed = dialect != "openai-completions"
    assert part == (
        {"text": "Sunny.", "thoughtSignature": SIG_TEXT} if signed else {"text": "Sunny."}
    )


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_gemini_thought_signature_400_after_another_vendors_calls(
    matrix: Matrix, dialect: str
) -> None:
    """A session another vendor's model began (Claude's or OpenAI's calls, unsigned) goes
    on with Gemini 3: the first call of that turn gets Google's documented placeholder
    signature (never another vendor's signature), so the request is not refused."""
    turns = [msg(TextContent(text="As I found: 24 °C in Paris."))]
    convo = matrix.clients[dialect].history()
    _, sent = converse(matrix, dialect, GEMINI_3, turns, Ask(tools=True), convo=convo)
    (part,) = [p for p in gemini_parts(sent[0].body) if "functionCall" in p]
    assert part["thoughtSignature"] == "skip_thought_signature_validator"


# --- 2. DeepSeek `reasoning_content` errors on the second turn ------------------------------

DEEPSEEK = "deepseek/deepseek-v4-flash"


def _assistants(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


@slow
@pytest.mark.parametrize("dialect", DIALECTS[:2], ids=SHORT.get)
def test_deepseek_reasoning_content_400_on_the_second_turn(matrix: Matrix, dialect: str) -> None:
    """DeepSeek's thinking mode refuses a tool loop whose assistant turns come back
    without their `reasoning_content` ("Missing `reasoning_content` field in the assistant
    message", or "must be passed back to the API"). Through the gateway each DeepSeek turn
    goes back with its own reasoning, the one after the calls and the later ones too."""
    turns = [
        msg(ThinkingContent(thinking="Paris weather: call the tool."), call("call_1", "Paris"),
            stop="tool_use"),
        msg(ThinkingContent(thinking="Got it: answer."), TextContent(text="24 °C, sunny.")),
        msg(ThinkingContent(thinking="Tomorrow: no tool."), TextContent(text="Rain.")),
    ]  # fmt: skip
    ask = Ask(tools=True, thinking=True)
    _, sent = converse(matrix, dialect, DEEPSEEK, turns[:2], ask)
    (looped,) = _assistants(sent[1].body)
    assert looped["reasoning_content"] == "Paris weather: call the tool."
    assert [c["id"] for c in looped["tool_calls"]] == ["call_1"]
    # A new question after the loop: every turn of the loop still goes back with its own.
    _, sent = converse(matrix, dialect, DEEPSEEK, turns, ask, user="And tomorrow?")
    later = _assistants(sent[2].body)
    assert [a.get("reasoning_content") for a in later] == [
        "Paris weather: call the tool.",
        "Got it: answer.",
    ]


@slow
@pytest.mark.parametrize("dialect", DIALECTS[:2], ids=SHORT.get)
def test_deepseek_reasoning_content_never_reaches_a_vendor_that_refuses_it(
    matrix: Matrix, dialect: str
) -> None:
    """`reasoning_content` is DeepSeek's field: OpenAI refuses a message with a property it
    does not know, so the same tool loop to OpenAI sends no such field."""
    turns = [
        msg(ThinkingContent(thinking="Paris weather: call the tool."), call("call_1", "Paris"),
            stop="tool_use"),
        msg(TextContent(text="24 °C, sunny.")),
    ]  # fmt: skip
    _, sent = converse(matrix, dialect, "openai/gpt-5", turns, Ask(tools=True, thinking=True))
    assert all("reasoning_content" not in a for a in _assistants(sent[1].body))


# --- 3. `message_start` usage 0/0 ----------------------------------------------------------


@slow
@pytest.mark.parametrize("api", ["anthropic-messages", "google-generative-ai"])
def test_message_start_usage_0_0(matrix: Matrix, api: str) -> None:
    """An Anthropic client (Claude Code) reads the prompt's size from `message_start`.
    Where the upstream says its input and cache tokens before the first content (Anthropic
    in its own message_start, Gemini on every chunk), `message_start` says them, never
    0/0; the end says the same, with the output."""
    spec, override = UPSTREAMS[api]
    turns = [msg(TextContent(text="Paris is sunny today."))]
    (got,), _ = converse(matrix, "anthropic-messages", spec, turns, Ask(), api=override,
                         edit=edit_for(api))  # fmt: skip
    read = got.form["usage"]
    assert got.start is not None and got.start["input_tokens"] > 0
    assert got.start == {k: read[k] for k in got.start}, (got.start, read)
    assert read["cache_read_input_tokens"] == USAGE.cache_read


@slow
@pytest.mark.parametrize("api", list(UPSTREAMS))
def test_message_start_usage_0_0_final_usage_exact(matrix: Matrix, api: str) -> None:
    """Every upstream: the final usage (the `message_delta` the SDK merges) is exactly the
    upstream's, input and cache counts included; `message_start` says those counts or,
    where the upstream says them only at its end (Responses, Chat Completions, Bedrock,
    Mistral, Ollama), nothing yet: never other numbers."""
    spec, override = UPSTREAMS[api]
    turns = [msg(TextContent(text="Paris is sunny today."))]
    (got,), _ = converse(matrix, "anthropic-messages", spec, turns, Ask(), api=override,
                         edit=edit_for(api))  # fmt: skip
    read = got.form["usage"]
    assert read["input_tokens"] > 0 and read["output_tokens"] == USAGE.output
    assert got.start is not None
    said = {k: read[k] for k in got.start}
    assert got.start in (said, dict.fromkeys(said, 0)), (got.start, read)


# --- 4. "Content block is not a thinking block" ---------------------------------------------

DELTA_BLOCKS = {
    "text_delta": ("text",),
    "citations_delta": ("text",),
    "thinking_delta": ("thinking",),
    "signature_delta": ("thinking",),
    "input_json_delta": ("tool_use", "server_tool_use"),
}
"""Which block each delta may go to: Claude Code throws "Content block is not a thinking
block" (and "Content block not found") on any other."""


def strict_blocks(events: list[Any]) -> list[str]:
    """The block types of a raw Messages stream, read as strictly as Claude Code reads
    them: blocks opened at the next index, each delta to an open block of its type."""
    opened: list[str] = []
    open_now: set[int] = set()
    for e in events:
        if e.type == "content_block_start":
            assert e.index == len(opened), f"block {e.index} opened after {len(opened)} blocks"
            opened.append(e.content_block.type)
            open_now.add(e.index)
        elif e.type == "content_block_delta":
            assert e.index in open_now, (
                f"{e.delta.type} to block {e.index}: Content block not found"
            )
            kind = opened[e.index]
            assert kind in DELTA_BLOCKS.get(e.delta.type, (kind,)), (
                f"{e.delta.type} to a {kind} block: Content block is not a thinking block"
            )
        elif e.type == "content_block_stop":
            assert e.index in open_now, f"block {e.index} stopped twice or never opened"
            open_now.discard(e.index)
    assert not open_now, f"blocks {sorted(open_now)} never stopped"
    return opened


@slow
@pytest.mark.parametrize("api", list(UPSTREAMS))
def test_content_block_is_not_a_thinking_block(matrix: Matrix, api: str) -> None:
    """Reasoning that comes back after text and around a call (Kimi, MiniMax and Z.AI
    interleave it so on Chat Completions) opens a new thinking block at a fresh index:
    every thinking and signature delta goes to a thinking block."""
    spec, override = UPSTREAMS[api]
    sig = CLAUDE_SIG if api in SIGNED else None
    script = msg(
        ThinkingContent(thinking="Which city?", signature=sig),
        TextContent(text="Let me check Paris."),
        ThinkingContent(thinking="Now the tool.", signature=sig),
        call("call_1", "Paris"),
        stop="tool_use",
    )
    model = Upstream(spec, api=override).resolve()
    path, synth = vendor_says(script, model, matrix.folder / f"pain{matrix.n + 1}")
    read = oracle(model, synth)
    client = matrix.clients["anthropic-messages"]
    with fake_vendor(scenarios={ANY_MODEL: [path]}) as fake:
        name = matrix.name()
        matrix.serve(GatewayConfig(models={name: upstream(spec, override, fake.url)}))
        kw = client._kwargs(name, client.start(), Ask(tools=True, thinking=True))
        with client.sdk.messages.create(stream=True, **kw) as s:
            events = list(s)
    opened = strict_blocks(events)
    said = [b.type for b in read.content]
    expected = {"thinking": "thinking", "text": "text", "tool_call": "tool_use"}
    assert [o for o in opened if o != "redacted_thinking"] == [expected[t] for t in said]


def _thinking_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") in ("thinking", "redacted_thinking")
    ]


def _anthropic_accepts(body: dict[str, Any], headers: dict[str, str]) -> None:
    """What Anthropic checks of thinking: every thinking block signed (by Anthropic: no
    other vendor's signature), and with thinking on, the tool loop's turn opening with
    its thinking (`problems`); where the loop began elsewhere, thinking is off instead."""
    wrong = problems("anthropic-messages", body, headers, CLIENT_KEY)
    assert not wrong, wrong
    for b in _thinking_blocks(body):
        assert b.get("signature") == CLAUDE_SIG or b["type"] == "redacted_thinking", b


@slow
@pytest.mark.parametrize("switch", ["config", "route"])
def test_content_block_is_not_a_thinking_block_when_the_vendor_changes(
    matrix: Matrix, switch: str
) -> None:
    """Claude Code with thinking on, one conversation: a tool loop begun on Gemini goes on
    at Anthropic (the config changed, or the route fell over on a 429). No request sends
    Anthropic a thinking block it did not sign: the loop Gemini began goes on with
    thinking off (Anthropic's rule for a loop begun without it); the next loop, Claude's
    own, sends its signed thinking first."""
    gemini, claude = Upstream(GEMINI_3).resolve(), Upstream("anthropic/claude-sonnet-4-5").resolve()
    folder = matrix.folder / f"pain{matrix.n + 1}"
    on_gemini = msg(
        ThinkingContent(thinking="Paris: call the tool."),
        call("call_1", "Paris", thought_signature=SIG),
        stop="tool_use",
    )
    at_claude = [
        msg(TextContent(text="24 °C and sunny in Paris.")),
        msg(ThinkingContent(thinking="Rome now.", signature=CLAUDE_SIG),
            call("toolu_02Pains", "Rome"), stop="tool_use"),
        msg(ThinkingContent(thinking="Done.", signature=CLAUDE_SIG), TextContent(text="19 °C.")),
    ]  # fmt: skip
    first = [vendor_says(on_gemini, gemini, folder / "gemini")[0]]
    if switch == "route":
        first.append(vendor_says(http_error(gemini.api, "rate_limit", "busy", 120), gemini,
                                 folder / "gemini")[0])  # fmt: skip
    later = [vendor_says(t, claude, folder / "claude")[0] for t in at_claude]
    client = matrix.clients["anthropic-messages"]
    ask = Ask(tools=True, thinking=True)
    with (
        fake_vendor(scenarios={ANY_MODEL: first}) as a,
        fake_vendor(scenarios={ANY_MODEL: later}) as b,
    ):
        name = matrix.name()
        to_gemini = upstream(GEMINI_3, None, a.url)
        to_claude = upstream("anthropic/claude-sonnet-4-5", None, b.url)
        if switch == "route":
            matrix.serve(GatewayConfig(models={name: f"route:{name}"},
                                       routes={name: [to_gemini, to_claude]}))  # fmt: skip
        else:
            matrix.serve(GatewayConfig(models={name: to_gemini}))
        convo = client.start()
        for n, follow_up in enumerate([None, "And Rome?", None, None]):
            got = client.send(name, convo, ask)
            assert not isinstance(got, Failure), f"turn {n + 1}: {got}"
            if n == 0 and switch == "config":
                matrix.serve(GatewayConfig(models={name: to_claude}))
            if n < 3:
                convo = client.follow(convo, got, follow_up)
        sent = [r.body for r in b.requests]
        heads = [r.headers for r in b.requests]
    assert len(sent) == 3
    for body, headers in zip(sent, heads, strict=True):
        _anthropic_accepts(body, headers)
    # The loop Gemini began: thinking off, Gemini's thinking as text, its signature gone.
    assert (sent[0].get("thinking") or {}).get("type") in (None, "disabled")
    assert SIG not in json.dumps(sent[0])
    # Claude's own loop: thinking on, its signed thinking first in its tool-use turn.
    assert sent[2]["thinking"]["type"] == "enabled"
    last = [m for m in sent[2]["messages"] if m["role"] == "assistant"][-1]
    assert last["content"][0] == {"type": "thinking", "thinking": "Rome now.",
                                  "signature": CLAUDE_SIG}  # fmt: skip


# --- 5. Cache read and write tokens lost in translation ------------------------------------

CACHING = ("anthropic-messages", "openai-responses", "google-generative-ai",
           "bedrock-converse-stream")  # fmt: skip
CACHE_WRITE = ("anthropic-messages", "bedrock-converse-stream", "openai-responses")
"""The upstreams that say a cache write (Responses: `input_tokens_details.cache_write_tokens`,
as OpenRouter's says it; Gemini's cache has no such count)."""


@slow
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("api", CACHING)
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_cache_read_and_write_tokens_lost_in_translation(
    matrix: Matrix, dialect: str, api: str, stream: bool
) -> None:
    """The upstream's cache reads and writes reach each client in its own fields: Anthropic
    `cache_read_input_tokens` / `cache_creation_input_tokens`; OpenAI
    `input_tokens_details.cached_tokens` (Responses) and
    `prompt_tokens_details.cached_tokens` (Chat), its input total counting them."""
    spec, override = UPSTREAMS[api]
    turns = [msg(TextContent(text="Paris is sunny today."))]
    (got,), _ = converse(matrix, dialect, spec, turns, Ask(stream=stream), api=override,
                         edit=edit_for(api))  # fmt: skip
    u = got.form["usage"]
    write = USAGE.cache_write if api in CACHE_WRITE else 0
    if dialect == "anthropic-messages":
        assert u["cache_read_input_tokens"] == USAGE.cache_read
        assert u["cache_creation_input_tokens"] == write
    else:
        total = u["input_tokens"] if dialect == "openai-responses" else u["prompt_tokens"]
        assert u["cached_tokens"] == USAGE.cache_read
        assert total >= USAGE.cache_read + write + 1


# --- 6. `count_tokens` broken for non-Anthropic backends -----------------------------------

COUNT_TOOLS = [
    {"name": "get_weather", "description": "The weather in a city",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                      "required": ["city"]}},
]  # fmt: skip
COUNT_MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def sdk_count(matrix: Matrix, target: Upstream, tools: bool = True) -> tuple[int, str]:
    """`client.messages.count_tokens` (the Anthropic SDK) through the gateway: the count
    and what `x-stream-core-count` says of it."""
    name = matrix.name()
    matrix.serve(GatewayConfig(models={name: target}))
    sdk = matrix.clients["anthropic-messages"].sdk
    extra = {"tools": COUNT_TOOLS} if tools else {}
    raw = sdk.messages.with_raw_response.count_tokens(
        model=name, system="Answer briefly.", messages=COUNT_MESSAGES, **extra
    )
    return raw.parse().input_tokens, raw.headers["x-stream-core-count"]


@slow
def test_count_tokens_broken_for_non_anthropic_backends(matrix: Matrix) -> None:
    """Claude Code counts its context with `count_tokens`. Anthropic upstream: the
    vendor's own count of the client's body (tools and system included), exact; Gemini:
    its `countTokens` of the request the gateway would send, exact; an upstream with no
    count endpoint: stream-core's estimate, tools and system counted, the header saying
    it is one. No vendor key leaves the gateway, no client key reaches a vendor."""
    from ops_upstreams import JsonUpstream

    anthropic = JsonUpstream({"input_tokens": 421})
    gemini = JsonUpstream({"totalTokens": 173})
    try:
        claude = upstream("anthropic/claude-sonnet-4-5", None, anthropic.url)
        assert sdk_count(matrix, claude) == (421, "exact")
        assert sdk_count(matrix, upstream(GEMINI_3, None, gemini.url)) == (173, "exact")
    finally:
        anthropic.close()
        gemini.close()
    (seen,) = anthropic.requests
    assert seen.request_line.startswith("POST /v1/messages/count_tokens ")
    assert seen.headers["x-api-key"] == VENDOR_KEY
    assert json.loads(seen.body) == {"model": "claude-sonnet-4-5", "system": "Answer briefly.",
                                     "messages": COUNT_MESSAGES, "tools": COUNT_TOOLS}  # fmt: skip
    (seen,) = gemini.requests
    assert ":countTokens" in seen.request_line
    assert CLIENT_KEY not in json.dumps(seen.headers)
    sent = json.loads(seen.body)["generateContentRequest"]
    assert sent["systemInstruction"]["parts"] == [{"text": "Answer briefly."}]
    (declared,) = sent["tools"][0]["functionDeclarations"]
    assert declared["name"] == "get_weather"
    # Chat Completions has no count endpoint: the estimate, tools and system included.
    chat = upstream("openai/gpt-5", None, "http://127.0.0.1:9")  # never called
    counted, how = sdk_count(matrix, chat)
    bare, _ = sdk_count(matrix, chat, tools=False)
    assert how == "estimate" and counted > bare > 0


# --- 7. Mistral's nine-character tool ids ---------------------------------------------------

MISTRAL = "mistral/mistral-medium-2604"
TWINS = ("toolu_01A09q90qw90lq917835lq9", "toolu_01A09q90qw90lq917835lq8")
"""Two of Claude's ids alike in their first nine letters and digits."""


def _parallel_history(dialect: str, ids: tuple[str, str]) -> list[Any]:
    """A parallel pair of calls another vendor's model made, with their results, in the
    client's dialect."""
    cities = ("Paris", "Rome")
    ask = {"role": "user", "content": "Weather in Paris and Rome?"}
    if dialect == "anthropic-messages":
        calls = [{"type": "tool_use", "id": i, "name": "get_weather", "input": {"city": c}}
                 for i, c in zip(ids, cities, strict=True)]  # fmt: skip
        results = [{"type": "tool_result", "tool_use_id": i, "content": f"{c}: fine"}
                   for i, c in zip(ids, cities, strict=True)]  # fmt: skip
        return [ask, {"role": "assistant", "content": calls}, {"role": "user", "content": results}]
    if dialect == "openai-responses":
        items: list[Any] = [ask]
        items += [
            {
                "type": "function_call",
                "call_id": i,
                "name": "get_weather",
                "arguments": json.dumps({"city": c}),
            }
            for i, c in zip(ids, cities, strict=True)
        ]
        items += [{"type": "function_call_output", "call_id": i, "output": f"{c}: fine"}
                  for i, c in zip(ids, cities, strict=True)]  # fmt: skip
        return items
    fns = [{"id": i, "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}
           for i, c in zip(ids, cities, strict=True)]  # fmt: skip
    return [ask, {"role": "assistant", "content": None, "tool_calls": fns},
            *({"role": "tool", "tool_call_id": i, "content": f"{c}: fine"}
              for i, c in zip(ids, cities, strict=True))]  # fmt: skip


def _mistral_pairs(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    return calls, answered


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_mistral_nine_character_tool_ids(matrix: Matrix, dialect: str) -> None:
    """Mistral refuses any tool-call id that is not nine letters and digits. A history of
    Claude's `toolu_...` ids or OpenAI's `call_...` ids reaches Mistral as nine-character
    ids, two alike ones kept apart, each result answering its own call."""
    answer = [msg(TextContent(text="Paris fine, Rome fine."))]
    ids = (
        TWINS
        if dialect == "anthropic-messages"
        else ("call_Pj6Zfq8kRdBgwsSWGcZPo0Mh", "call_Pj6Zfq8kRdBgwsSWGcZPo0Mi")
    )
    convo = _parallel_history(dialect, ids)
    _, sent = converse(matrix, dialect, MISTRAL, answer, Ask(tools=True), convo=convo)
    calls, answered = _mistral_pairs(sent[0].body)
    assert len(set(calls)) == 2 and all(len(i) == 9 and i.isalnum() for i in calls), calls
    assert answered == calls


@slow
@pytest.mark.parametrize("dialect", DIALECTS, ids=SHORT.get)
def test_mistral_nine_character_tool_ids_of_its_own_come_back(matrix: Matrix, dialect: str) -> None:
    """Mistral's own ids go to the client (the SDK sees them) and come back to Mistral
    unchanged on the next turn."""
    turns = [
        msg(call("Wq1k7Zp3K", "Paris"), call("Xr2m8Aq4L", "Rome"), stop="tool_use"),
        msg(TextContent(text="Paris 24 °C, Rome 19 °C.")),
    ]
    readings, sent = converse(matrix, dialect, MISTRAL, turns, Ask(tools=True))
    seen = [c[1] for c in readings[0].form["content"] if c[0] == "tool"]
    assert seen == ["Wq1k7Zp3K", "Xr2m8Aq4L"]
    assert _mistral_pairs(sent[1].body) == (["Wq1k7Zp3K", "Xr2m8Aq4L"],) * 2
