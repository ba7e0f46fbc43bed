"""OpenAI Responses: server tools, built-in calls, approvals, citations, files and encrypted
reasoning, replayed from the 15 recordings of `MODERN.md`, and sent back (issue 35)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import anyio
import httpx
import pytest

from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Context,
    FileContent,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import (
    contract_model,
    load_fixtures,
    options,
    replay,
    run_provider,
    sse_response,
    whole,
)
from stream_core.contract_tests.modern import check_modern

API = "openai-responses"
MODERN = [
    f
    for f in load_fixtures(API)
    if "server_tools" in f.expect
    or "reasoning_opaque" in f.expect
    or "client_builtin_calls" in f.expect
    or "approval_requests" in f.expect
]
BY_NAME = {f.name: f for f in load_fixtures(API)}
ANSWER = (
    b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r",'
    b'"object":"response","status":"completed","output":[],"usage":{"input_tokens":1,'
    b'"output_tokens":1}}}\n\n'
)


def _message(name: str) -> AssistantMessage:
    return replay(BY_NAME[name], whole(BY_NAME[name].body)).message


def _payload(context: Context, api: str = API, **opts: Any) -> dict[str, Any]:
    """The JSON body the provider sends for `context`."""
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return sse_response([ANSWER])

    async def main() -> None:
        await run_provider(api, answer, context=context, opts=options(**opts))

    anyio.run(main)
    return seen[0]


def test_the_modern_recordings_are_all_here() -> None:
    assert len(MODERN) == 15, [f.name for f in MODERN]


@pytest.mark.parametrize("fixture", MODERN, ids=lambda f: f.name)
def test_modern_fields_are_kept(fixture: Any) -> None:
    message = replay(fixture, whole(fixture.body)).message
    check_modern(message, fixture.expect)
    expect = fixture.expect
    for entry in expect.get("client_builtin_calls") or ():
        call = next(b for b in message.content if isinstance(b, ToolCall) and b.builtin)
        assert call.id == entry["call_id"] and call.builtin == entry["vendor_type"]
        assert call.raw is not None and call.raw["id"] == entry["item_id"]
        assert message.stop_reason == "tool_use"
    for entry in expect.get("approval_requests") or ():
        (request,) = [b for b in message.content if isinstance(b, ApprovalRequest)]
        assert (request.id, request.name, request.server) == (
            entry["id"],
            entry["name"],
            entry["server_label"],
        )
        assert request.arguments == entry["arguments"] and message.stop_reason == "stop"
    for entry in expect.get("citations") or ():
        holders = [
            (b, c)
            for b in message.content
            if isinstance(b, TextContent)
            for c in b.citations or ()
            if c.raw == entry["annotation"]
        ]
        assert holders, entry
        if "span_text" in entry:
            assert any(b.text[c.start : c.end] == entry["span_text"] for b, c in holders)
    for entry in expect.get("files") or ():
        (file,) = [b for b in message.content if isinstance(b, FileContent)]
        digest = hashlib.sha256(base64.b64decode(file.data or "")).hexdigest()
        assert digest == entry["sha256"] and file.mime_type == entry["media_type"]
        calls = [b for b in message.content if isinstance(b, ServerToolCall)]
        assert file.call_id == calls[0].id
    for entry in expect.get("reasoning_opaque") or ():
        token = entry.get("encrypted_content_in_response_completed") or entry.get(
            "encrypted_content"
        )
        if not token:
            continue  # reasoning with nothing opaque to keep
        kept = [
            json.loads(b.signature or "{}")
            for b in message.content
            if isinstance(b, ThinkingContent) and b.signature
        ]
        assert any(k.get("id") == entry["item_id"] for k in kept)
        assert any(k.get("encrypted_content") == token for k in kept), entry["item_id"]


def test_items_the_vendor_ran_are_calls_with_a_reading_of_their_result() -> None:
    m = _message("vercel-ai__openai-mcp-tool-approval.4")
    calls = [b for b in m.content if isinstance(b, ServerToolCall)]
    assert [(c.name, c.kind) for c in calls] == [
        ("mcp_list_tools", "mcp"),
        ("create_short_url", "mcp"),
    ]
    results = [b for b in m.content if isinstance(b, ServerToolResult)]
    assert results[-1].call_id == calls[-1].id and "zip1.io" in results[-1].text
    assert results[-1].raw is None  # a reading: the call's raw goes back
    m = _message("vercel-ai__openai-file-search-tool.2")
    (result,) = [b for b in m.content if isinstance(b, ServerToolResult)]
    assert result.sources and result.sources[0].filename == "ai.pdf"
    assert m.usage.server_tools == {"file_search": 1}
    m = _message("pydantic-ai__test_run.0")
    assert m.usage.server_tools == {"web_search": 7}


def _history(name: str, *results: ToolResultMessage | UserMessage) -> Context:
    return Context(
        system_prompt="Be brief.",
        messages=[UserMessage(content="Go"), _message(name), *results],
    )


def test_server_items_and_reasoning_go_back_verbatim_in_order() -> None:
    fixture = BY_NAME["pydantic-ai__test_openai_responses_model_mcp_server_tool_stream.0"]
    m = _message(fixture.name)
    sent = _payload(_history(fixture.name))["input"]
    types = [i.get("type") for i in sent[2:]]
    assert types == ["mcp_list_tools", "reasoning", "mcp_call", "reasoning", "message"]
    calls = [b.raw for b in m.content if isinstance(b, ServerToolCall)]
    assert [i for i in sent if i.get("type") in ("mcp_list_tools", "mcp_call")] == calls


def test_reencrypted_reasoning_goes_back_with_the_completed_token() -> None:
    name = "vercel-ai__azure-reasoning-encrypted-content.1.0"
    (entry,) = BY_NAME[name].expect["reasoning_opaque"]
    result = ToolResultMessage(
        tool_call_id="call_UdvUeOElp5zdU0DKr6IoyhjE", tool_name="calculator", content="19"
    )
    sent = _payload(_history(name, result))["input"]
    (reasoning,) = [i for i in sent if i.get("type") == "reasoning"]
    assert reasoning["encrypted_content"] == entry["encrypted_content_in_response_completed"]


def test_builtin_calls_go_back_with_their_outputs() -> None:
    shell = ToolResultMessage(
        tool_call_id="call_pbxjNs1tMJUahLZKAS9qLtvw",
        tool_name="shell",
        content=".\n..\nnotes.txt",
        details={"stdout": ".\n..\nnotes.txt", "stderr": "", "exit_code": 0},
    )
    sent = _payload(_history("vercel-ai__openai-shell-tool.1.0", shell))["input"]
    call, output = sent[-2:]
    assert call["type"] == "shell_call" and call["call_id"] == "call_pbxjNs1tMJUahLZKAS9qLtvw"
    assert output == {
        "type": "shell_call_output",
        "call_id": "call_pbxjNs1tMJUahLZKAS9qLtvw",
        "output": [
            {
                "stdout": ".\n..\nnotes.txt",
                "stderr": "",
                "outcome": {"type": "exit", "exit_code": 0},
            }
        ],
        "max_output_length": 8912,
    }
    found = ToolResultMessage(
        tool_call_id="call_RWTIIVfxsJW9fecsg6fy23Dy",
        tool_name="tool_search",
        content="",
        details={"tools": [{"type": "function", "name": "weather", "parameters": {}}]},
    )
    sent = _payload(_history("vercel-ai__openai-client-tool-search.1", found))["input"]
    call, output = sent[-2:]
    assert call["type"] == "tool_search_call" and call["call_id"] == "call_RWTIIVfxsJW9fecsg6fy23Dy"
    assert output["type"] == "tool_search_output" and output["execution"] == "client"
    assert output["tools"][0]["name"] == "weather"


@pytest.mark.parametrize(
    ("builtin", "field", "value", "want"),
    [
        (
            "apply_patch_call",
            "operation",
            {"type": "delete_file", "path": "a"},
            "apply_patch_call_output",
        ),
        ("custom_tool_call", "input", "print(1)", "custom_tool_call_output"),
        (
            "local_shell_call",
            "action",
            {"type": "exec", "command": ["ls"]},
            "local_shell_call_output",
        ),
    ],
)
def test_each_builtin_result_is_its_own_output_item(
    builtin: str, field: str, value: Any, want: str
) -> None:
    raw = {"type": builtin, "id": "x_1", "call_id": "c1", "status": "completed", field: value}
    call = ToolCall(id="c1", name="t", arguments={}, builtin=builtin, raw=raw)
    model = contract_model(API)
    m = AssistantMessage(
        content=[call], api=API, provider=model.provider, model=model.id, stop_reason="tool_use"
    )
    result = ToolResultMessage(tool_call_id="c1", tool_name="t", content="done", is_error=True)
    sent = _payload(Context(messages=[UserMessage(content="Go"), m, result]))["input"]
    assert sent[-2] == raw
    assert sent[-1]["type"] == want and sent[-1]["call_id"] == "c1"
    if builtin == "apply_patch_call":
        assert sent[-1]["status"] == "failed" and sent[-1]["output"] == "done"


def test_approval_answer_and_program_call_go_back() -> None:
    name = "vercel-ai__openai-mcp-tool-approval.3"
    m = _message(name)
    (request,) = [b for b in m.content if isinstance(b, ApprovalRequest)]
    answer = UserMessage(content=[ApprovalResponse(request_id=request.id, approve=True)])
    sent = _payload(_history(name, answer))["input"]
    assert request.raw in sent
    assert sent[-1] == {
        "type": "mcp_approval_response",
        "approval_request_id": request.id,
        "approve": True,
    }
    name = "vercel-ai__programmatic-tool-calling.1"
    result = ToolResultMessage(
        tool_call_id="call_VgDSZztLociNcutQZWkC2fmL", tool_name="getInventory", content="{}"
    )
    sent = _payload(_history(name, result))["input"]
    (call,) = [i for i in sent if i.get("type") == "function_call"]
    assert call["caller"] == {"type": "program", "caller_id": "call_voPdoCqf8APY4DMpam3bdmxq"}
    assert any(i.get("type") == "program" for i in sent)


def test_citations_go_back_as_annotations_and_as_text_elsewhere() -> None:
    name = "pydantic-ai__test_run.0"
    m = _message(name)
    sent = _payload(_history(name))["input"]
    (message,) = [i for i in sent if i.get("type") == "message"]
    notes = message["content"][0]["annotations"]
    text = next(b for b in m.content if isinstance(b, TextContent))
    assert notes == [c.raw for c in text.citations or ()]
    other = _payload(_history(name), api="anthropic-messages")
    assistant = [x for x in other["messages"] if x["role"] == "assistant"]
    dumped = json.dumps(assistant)
    assert {part["type"] for x in assistant for part in x["content"]} <= {"text", "tool_use"}
    assert "opentelemetry-python-contrib.readthedocs.io" in dumped  # the sources, as text


def test_server_tools_are_asked_for() -> None:
    tools = [
        ServerTool(kind="web_search", allowed_domains=["a.org"], user_location={"country": "FR"}),
        ServerTool(kind="file_search", options={"vector_store_ids": ["vs_1"]}, max_uses=3),
        ServerTool(kind="code_execution"),
        ServerTool(kind="image_generation", options={"quality": "low"}),
        ServerTool.native(API, {"type": "mcp", "server_label": "x", "server_url": "https://x"}),
    ]
    context = Context(messages=[UserMessage(content="Go")], tools=tools)
    payload = _payload(context)
    assert payload["tools"] == [
        {
            "type": "web_search",
            "filters": {"allowed_domains": ["a.org"]},
            "user_location": {"type": "approximate", "country": "FR"},
        },
        {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 3},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "image_generation", "quality": "low"},
        {"type": "mcp", "server_label": "x", "server_url": "https://x"},
    ]
    assert payload["include"] == [
        "reasoning.encrypted_content",
        "web_search_call.action.sources",
        "file_search_call.results",
        "code_interpreter_call.outputs",
    ]


def test_a_server_tool_it_cannot_run_raises_at_stream() -> None:
    for tool, words in (
        (ServerTool(kind="web_fetch"), "web_fetch"),
        (ServerTool(kind="file_search"), "vector_store_ids"),
    ):
        with pytest.raises(ValueError, match=words):
            _payload(Context(messages=[UserMessage(content="Go")], tools=[tool]))


def test_a_pdf_goes_as_input_file() -> None:
    pdf = FileContent(
        data=base64.b64encode(b"%PDF-1.4").decode(), mime_type="application/pdf", name="a.pdf"
    )
    by_id = FileContent(file_id="file-1", mime_type="application/pdf")
    context = Context(messages=[UserMessage(content=[TextContent(text="Read"), pdf, by_id])])
    (user,) = _payload(context)["input"]
    assert user["content"][1:] == [
        {
            "type": "input_file",
            "filename": "a.pdf",
            "file_data": f"data:application/pdf;base64,{pdf.data}",
        },
        {"type": "input_file", "file_id": "file-1"},
    ]
    video = FileContent(data="AAAA", mime_type="video/mp4")
    with pytest.raises(ValueError, match="openai-responses"):
        _payload(Context(messages=[UserMessage(content=[video])]))


def _from_bytes(body: bytes) -> AssistantMessage:
    async def main() -> AssistantMessage:
        return (await run_provider(API, [sse_response([body])])).message

    return anyio.run(main)


def _kept(message: AssistantMessage) -> list[Any]:
    """What `vendor_bytes` writes back of a message: all but reasoning and vendor ids."""
    out = []
    for b in message.content:
        if isinstance(b, ThinkingContent):
            continue
        if isinstance(b, TextContent):
            out.append((b.text, [c.model_dump() for c in b.citations or ()]))
        else:
            out.append(b.model_dump(exclude={"thought_signature"}))
    return out


@pytest.mark.parametrize("fixture", MODERN, ids=lambda f: f.name)
def test_vendor_bytes_of_a_recorded_message_replays_to_it(fixture: Any) -> None:
    from stream_core.testing import vendor_bytes

    message = _message(fixture.name)
    again = _from_bytes(vendor_bytes(message, API).body)
    assert _kept(again) == _kept(message)
    assert again.stop_reason == message.stop_reason


def test_vendor_bytes_writes_scripted_server_calls_with_their_results() -> None:
    from stream_core import Citation, Source
    from stream_core.testing import faux_message, vendor_bytes

    model = contract_model(API)
    scripted = AssistantMessage(
        content=[
            ServerToolCall(
                id="ws_1",
                name="web_search_call",
                kind="web_search",
                input={"type": "search", "query": "paris"},
            ),  # fmt: skip
            ServerToolResult(
                call_id="ws_1",
                name="web_search_call",
                kind="web_search",
                sources=[Source(url="https://a.test")],
            ),  # fmt: skip
            ServerToolCall(id="ig_1", name="image_generation_call", kind="image_generation"),
            FileContent(
                data=base64.b64encode(b"\x89PNG\r\n").decode(),
                mime_type="image/png",
                call_id="ig_1",
            ),  # fmt: skip
            TextContent(text="Sunny.", citations=[Citation(url="https://a.test", start=0, end=5)]),
        ],
        api=API,
        provider=model.provider,
        model=model.id,
    )
    again = _from_bytes(vendor_bytes(faux_message(scripted), API).body)
    call, result, image_call, image, text = again.content
    assert isinstance(call, ServerToolCall) and call.input == {"type": "search", "query": "paris"}
    assert isinstance(result, ServerToolResult) and result.sources[0].url == "https://a.test"
    assert isinstance(image, FileContent) and image.call_id == "ig_1" and image.data
    assert isinstance(text, TextContent) and text.citations is not None
    assert (text.citations[0].url, text.citations[0].start, text.citations[0].end) == (
        "https://a.test",
        0,
        5,
    )
    assert again.usage.server_tools == {"web_search": 1, "image_generation": 1}
    lone = ServerToolCall(id="x", name="web_fetch", kind="web_fetch")
    with pytest.raises(ValueError, match="vendor_bytes"):
        vendor_bytes(faux_message(scripted.model_copy(update={"content": [lone]})), API)
