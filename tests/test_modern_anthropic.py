"""Issue 35 on the Messages API: the modern recordings (server tools, citations, generated
files, tool search, programmatic calls) replayed through the provider keep everything
their `expect` lists, and the next request built from the resulting history carries it
back as the vendor sent it; another vendor gets text that keeps the sources.

The expected next request is computed here from the recording's own events (a small
reducer of the vendor's blocks), not from the provider's reading of them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    FileContent,
    Model,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import (
    Fixture,
    contract_model,
    load_fixtures,
    options,
    replay,
    sse_response,
    whole,
)

API = "anthropic-messages"
MODERN = [
    "pydantic-ai__test_anthropic_code_execution_tool_stream.0",
    "pydantic-ai__test_anthropic_text_editor_code_execution_tool_stream.0",
    "vercel-ai__anthropic-code-execution-20250825.2",
    "vercel-ai__anthropic-code-execution-20250825.pptx-skill",
    "vercel-ai__anthropic-tool-search-bm25.1.0",
    "vercel-ai__anthropic-tool-search-deferred-bm25.0",
    "vercel-ai__anthropic-tool-search-deferred-bm25.1",
    "vercel-ai__anthropic-web-fetch-tool-20260209.1",
    "pydantic-ai__test_anthropic_model_web_search_tool_stream.0",
    "pydantic-ai__test_anthropic_text_parts_ahead_of_built_in_tool_call.1",
]
FIXTURES = {f.name: f for f in load_fixtures(API) if f.name in MODERN}

OK_BODY = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_next","usage":'
    b'{"input_tokens":12,"output_tokens":1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)
CHAT_OK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_all_ten_recordings_are_shipped() -> None:
    assert sorted(FIXTURES) == sorted(MODERN)


def same(got: Any, want: Any) -> bool:
    """`got` equals `want`, where `want` may hold a long string as its digest
    (`{"sha256", "length", "prefix"}`, fixtures/INDEX.md)."""
    if isinstance(want, dict) and set(want) == {"sha256", "length", "prefix"}:
        return isinstance(got, str) and hashlib.sha256(got.encode()).hexdigest() == want["sha256"]
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(want)
            and all(same(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    return bool(got == want)


_runs: dict[str, AssistantMessage] = {}


def message_of(name: str) -> AssistantMessage:
    if name not in _runs:
        f = FIXTURES[name]
        run = replay(f, whole(f.body))
        assert run.message.error is None, run.message.error
        _runs[name] = run.message
    return _runs[name]


# --- the expect fields ----------------------------------------------------------------------


@pytest.mark.parametrize("name", MODERN)
def test_server_tools_are_kept_with_their_results(name: str) -> None:
    expect, message = FIXTURES[name].expect, message_of(name)
    calls = {b.id: b for b in message.content if isinstance(b, ServerToolCall)}
    results = {b.call_id: b for b in message.content if isinstance(b, ServerToolResult)}
    wanted = expect["server_tools"]
    assert len(calls) == sum(st.get("call_in_this_message", True) for st in wanted)
    assert len(results) == sum(st["result"] is not None for st in wanted)
    for st in wanted:
        if st.get("call_in_this_message", True):
            call = calls[st["id"]]
            assert call.name == st["name"]
            assert call.raw is not None and call.raw["type"] == st["vendor_type"]
            assert same(call.input, st["input"]) or "partial_json" in call.input
            assert call.raw["input"] == call.input
            assert call.caller == st.get("caller")
        else:
            assert st["id"] not in calls  # deferred: the call was in the previous answer
        if st["result"] is None:
            assert st.get("result_in_this_message") is False and st["id"] not in results
            continue
        result = results[st["id"]]
        assert result.raw is not None
        assert result.raw["type"] == st["result"]["vendor_type"]
        assert same(result.raw["content"], st["result"]["content"])
        assert result.kind is not None, result  # every tool here has a portable kind


@pytest.mark.parametrize("name", MODERN)
def test_citations_files_signatures_usage_and_container(name: str) -> None:
    expect, message = FIXTURES[name].expect, message_of(name)
    cited = [
        (b.text, c.raw)
        for b in message.content
        if isinstance(b, TextContent)
        for c in b.citations or ()
    ]
    want = [(c["span_text"], c["citation"]) for c in expect.get("citations", [])]
    assert same([list(x) for x in cited], [list(x) for x in want])
    for b in message.content:
        for c in (b.citations or ()) if isinstance(b, TextContent) else ():
            assert c.start is None and c.end is None  # the whole block
            assert c.url == c.raw["url"] and c.title == c.raw["title"]  # type: ignore[index]
    files = [(f.file_id, f.call_id) for f in message.content if isinstance(f, FileContent)]
    assert files == [(f["file_id"], f["tool_use_id"]) for f in expect.get("files", [])]
    signatures = [b.signature for b in message.content if isinstance(b, ThinkingContent)]
    assert signatures == [r["signature"] for r in expect.get("reasoning_opaque", [])]
    counts = {
        k.removesuffix("_requests"): n
        for k, n in (expect.get("server_tool_usage") or {}).items()
        if n
    }
    assert message.usage.server_tools == (counts or None)
    assert message.container == expect.get("container")


def test_a_generated_file_follows_the_result_that_made_it() -> None:
    message = message_of("vercel-ai__anthropic-code-execution-20250825.2")
    for i, b in enumerate(message.content):
        if isinstance(b, FileContent):
            before = message.content[i - 1]
            assert isinstance(before, ServerToolResult) and before.call_id == b.call_id


def test_results_read_as_text_a_harness_can_show() -> None:
    bash = message_of("pydantic-ai__test_anthropic_code_execution_tool_stream.0")
    (result,) = [b for b in bash.content if isinstance(b, ServerToolResult)]
    assert (result.kind, result.text, result.exit_code) == (
        "code_execution",
        "-428330955.97745\n",
        0,
    )
    editor = message_of("pydantic-ai__test_anthropic_text_editor_code_execution_tool_stream.0")
    errors = [b for b in editor.content if isinstance(b, ServerToolResult) and b.is_error]
    assert len(errors) == 1 and errors[0].text.startswith("unavailable")
    search = message_of("pydantic-ai__test_anthropic_model_web_search_tool_stream.0")
    first = next(b for b in search.content if isinstance(b, ServerToolResult))
    assert first.kind == "web_search" and first.sources and first.sources[0].url
    assert all(s.url and s.title for s in first.sources)
    fetch = message_of("vercel-ai__anthropic-web-fetch-tool-20260209.1")
    fetched = next(b for b in fetch.content if isinstance(b, ServerToolResult))
    assert fetched.kind == "web_fetch" and "Example Domain" in fetched.text
    assert fetched.sources[0].url == "https://example.com"
    loaded = message_of("vercel-ai__anthropic-tool-search-deferred-bm25.1").content[0]
    assert isinstance(loaded, ServerToolResult)
    assert (loaded.kind, loaded.text) == ("tool_search", "executeEditorOperation")


# --- the next request -----------------------------------------------------------------------


def vendor_blocks(f: Fixture) -> list[dict[str, Any]]:
    """The recording's content blocks as the vendor would have them whole (a reducer of its
    events): what the next request must carry back."""
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for line in f.body.decode().splitlines():
        if not line.startswith("data:"):
            continue
        ev = json.loads(line[5:])
        if ev.get("type") == "content_block_start":
            blocks[ev["index"]] = dict(ev["content_block"])
        elif ev.get("type") == "content_block_delta":
            b, d = blocks[ev["index"]], ev["delta"]
            if d["type"] == "text_delta":
                b["text"] += d["text"]
            elif d["type"] == "thinking_delta":
                b["thinking"] += d["thinking"]
            elif d["type"] == "signature_delta":
                b["signature"] = b.get("signature", "") + d["signature"]
            elif d["type"] == "citations_delta":
                b["citations"] = [*(b.get("citations") or []), d["citation"]]
            elif d["type"] == "input_json_delta":
                inputs[ev["index"]] = inputs.get(ev["index"], "") + d["partial_json"]
    out = []
    for i in sorted(blocks):
        b = blocks[i]
        if i in inputs:
            try:
                b["input"] = json.loads(inputs[i])
            except ValueError:
                b["input"] = None  # cut by the recording's source: not compared
        if b["type"] == "text":
            if not b["text"].strip():
                continue
            if not b.get("citations"):
                b.pop("citations", None)
        out.append(b)
    return out


def history_of(*names: str) -> list[Any]:
    messages: list[Any] = [UserMessage(content="Go.")]
    for name in names:
        m = message_of(name)
        messages.append(m)
        for b in m.content:
            if isinstance(b, ToolCall):
                messages.append(
                    ToolResultMessage(tool_call_id=b.id, tool_name=b.name, content="done")
                )
    messages.append(UserMessage(content="Next."))
    return messages


async def next_payload(messages: list[Any], model: Model | None = None) -> dict[str, Any]:
    model = model or contract_model(API)
    with respx.mock(assert_all_mocked=True) as router:
        route = router.route(host="contract.test").mock(return_value=sse_response([OK_BODY]))
        reply = await stream_core.complete(model, Context(messages=messages), options())
    assert reply.error is None, reply.error
    payload: dict[str, Any] = json.loads(route.calls[0].request.content)
    payload["_headers"] = dict(route.calls[0].request.headers)
    return payload


@pytest.mark.anyio
@pytest.mark.parametrize("name", MODERN)
async def test_the_next_request_carries_every_block_back_verbatim(name: str) -> None:
    payload = await next_payload(history_of(name))
    (assistant,) = [m for m in payload["messages"] if m["role"] == "assistant"]
    want = vendor_blocks(FIXTURES[name])
    got = assistant["content"]
    assert [b["type"] for b in got] == [b["type"] for b in want]
    for g, w in zip(got, want, strict=True):
        if w.get("input", 0) is None:
            assert g["id"] == w["id"]
            continue
        assert g == w, (g, w)
    container = FIXTURES[name].expect.get("container")
    assert payload.get("container") == (container["id"] if container else None)


@pytest.mark.anyio
async def test_a_deferred_tool_search_goes_back_in_both_answers() -> None:
    payload = await next_payload(
        history_of(
            "vercel-ai__anthropic-tool-search-deferred-bm25.0",
            "vercel-ai__anthropic-tool-search-deferred-bm25.1",
        )
    )
    first, second = [m["content"] for m in payload["messages"] if m["role"] == "assistant"]
    call = next(b for b in first if b["type"] == "server_tool_use")
    assert second[0]["type"] == "tool_search_tool_result"
    assert second[0]["tool_use_id"] == call["id"]
    assert call["caller"] == {"type": "direct"}
    assert all(b["caller"] == {"type": "direct"} for b in first + second if b["type"] == "tool_use")


@pytest.mark.anyio
async def test_a_handoff_to_chat_completions_keeps_urls_and_titles_as_text() -> None:
    name = "pydantic-ai__test_anthropic_model_web_search_tool_stream.0"
    message = message_of(name)
    model = contract_model("openai-completions")
    with respx.mock(assert_all_mocked=True) as router:
        route = router.route(host="contract.test").mock(return_value=sse_response([CHAT_OK]))
        reply = await stream_core.complete(model, Context(messages=history_of(name)), options())
    assert reply.error is None, reply.error
    payload = json.loads(route.calls[0].request.content)
    (assistant,) = [m for m in payload["messages"] if m["role"] == "assistant"]
    content = assistant["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    result = next(b for b in message.content if isinstance(b, ServerToolResult))
    for source in result.sources:
        assert source.url in text and source.title in text  # type: ignore[operator]
    for b in message.content:
        for c in (b.citations or ()) if isinstance(b, TextContent) else ():
            assert c.url in text  # type: ignore[operator]
    assert "encrypted_content" not in text and "srvtoolu_" not in json.dumps(payload["messages"])
