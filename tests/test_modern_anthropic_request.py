"""Issue 35 on the Messages API, asking side: `ServerTool` kinds become Anthropic's tool
objects (with the beta a tool needs, only then), a kind it lacks raises at `stream()`
naming the API, and a `FileContent` becomes a `document` (or `image`) block."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    Tool,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.contract_tests.kit import contract_model, options, sse_response

pytestmark = pytest.mark.anyio
API = "anthropic-messages"
PDF = base64.b64encode(b"%PDF-1.4 not really a pdf").decode()
LOOKUP = Tool(name="lookup", description="Look up.", parameters={"type": "object"})
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


async def send(context: Context) -> tuple[dict[str, Any], dict[str, str]]:
    with respx.mock(assert_all_mocked=True) as router:
        route = router.route(host="contract.test").mock(return_value=sse_response([OK_BODY]))
        reply = await stream_core.complete(contract_model(API), context, options())
    assert reply.error is None, reply.error
    request = route.calls[0].request
    return json.loads(request.content), dict(request.headers)


def ask(*tools: Any, content: Any = "Hi.") -> Context:
    return Context(messages=[UserMessage(content=content)], tools=list(tools) or None)


async def test_web_search_is_sent_with_its_options() -> None:
    tool = ServerTool.model_validate(
        {
            "kind": "web_search",
            "max_uses": 2,
            "allowed_domains": ["example.com", "docs.example.org"],
            "user_location": {"country": "FR", "city": "Lyon", "timezone": "Europe/Paris"},
        }
    )
    payload, headers = await send(ask(LOOKUP, tool))
    assert payload["tools"] == [
        {"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}},
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": 2,
            "allowed_domains": ["example.com", "docs.example.org"],
            "user_location": {
                "type": "approximate",
                "country": "FR",
                "city": "Lyon",
                "timezone": "Europe/Paris",
            },
        },
    ]
    assert "web-fetch" not in headers["anthropic-beta"]  # web search needs no beta


async def test_web_fetch_and_code_execution_add_their_betas_only_when_asked_for() -> None:
    payload, headers = await send(
        ask(
            ServerTool(kind="web_fetch", blocked_domains=["bad.example"]),
            ServerTool(kind="code_execution", options={"cache_control": {"type": "ephemeral"}}),
        )
    )
    assert payload["tools"] == [
        {"type": "web_fetch_20250910", "name": "web_fetch", "blocked_domains": ["bad.example"]},
        {
            "type": "code_execution_20250825",
            "name": "code_execution",
            "cache_control": {"type": "ephemeral"},
        },
    ]
    betas = headers["anthropic-beta"].split(",")
    assert "web-fetch-2025-09-10" in betas and "code-execution-2025-08-25" in betas
    _, plain = await send(ask(LOOKUP))
    assert plain["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"


async def test_tool_search_and_a_native_tool_go_as_given() -> None:
    mcp = {"type": "mcp_toolset", "mcp_server_name": "docs"}
    payload, _ = await send(ask(ServerTool(kind="tool_search"), ServerTool.native(API, mcp)))
    assert payload["tools"] == [
        {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
        mcp,
    ]


@pytest.mark.parametrize("kind", ["file_search", "image_generation"])
async def test_a_kind_the_api_lacks_raises_at_stream_naming_it(kind: str) -> None:
    with pytest.raises(ValueError, match=f"anthropic-messages runs no '{kind}'"):
        stream_core.stream(contract_model(API), ask(ServerTool(kind=kind)), options())


async def test_a_pdf_is_sent_as_a_document_block_with_citations_on_request() -> None:
    content = [
        TextContent(text="Summarize."),
        FileContent(data=PDF, mime_type="application/pdf", name="report.pdf", citations=True),
        FileContent(url="https://example.com/a.pdf", mime_type="application/pdf"),
        FileContent(data=base64.b64encode(b"plain words").decode(), mime_type="text/plain"),
    ]
    payload, headers = await send(ask(content=content))
    blocks = payload["messages"][0]["content"]
    assert blocks[-1].pop("cache_control") == {"type": "ephemeral"}  # the prompt's cache point
    assert blocks[1:] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "report.pdf",
            "citations": {"enabled": True},
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "plain words"},
        },
    ]
    assert "files-api" not in headers["anthropic-beta"]


async def test_an_uploaded_file_goes_by_id_with_the_files_beta_also_in_a_tool_result() -> None:
    context = Context(
        messages=[
            UserMessage(content="Read it."),
            AssistantMessage(
                api=API,
                provider="contract",
                model="contract-model",
                content=[stream_core.ToolCall(id="toolu_1", name="lookup", arguments={})],
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id="toolu_1",
                tool_name="lookup",
                content=[FileContent(file_id="file_011abc", mime_type="application/pdf")],
            ),
        ],
        tools=[LOOKUP],
    )
    payload, headers = await send(context)
    (result,) = payload["messages"][2]["content"]
    result.pop("cache_control", None)
    assert result["content"] == [
        {"type": "document", "source": {"type": "file", "file_id": "file_011abc"}}
    ]
    assert "files-api-2025-04-14" in headers["anthropic-beta"].split(",")


async def test_a_file_type_the_api_lacks_raises_at_stream() -> None:
    doc = FileContent(data=PDF, mime_type="application/zip")
    with pytest.raises(ValueError, match="anthropic-messages cannot take a FileContent"):
        stream_core.stream(contract_model(API), ask(content=[doc]), options())


async def test_blocks_written_by_hand_go_back_in_the_vendor_form() -> None:
    """A history built without vendor records (a script, a store): calls, results,
    citations and generated files are written in Anthropic's shapes, in order."""
    said: dict[str, Any] = {"api": API, "provider": "contract", "model": "contract-model"}
    cite = Citation(url="https://a.example", title="A", cited_text="a fact")
    answer = AssistantMessage(
        **said,
        container={"id": "container_1", "expires_at": "2030-01-01T00:00:00Z"},
        content=[
            ServerToolCall(id="srvtoolu_1", name="bash_code_execution", input={"command": "ls"}),
            ServerToolResult(
                call_id="srvtoolu_1", name="bash_code_execution", text="out", exit_code=0
            ),
            FileContent(file_id="file_1", call_id="srvtoolu_1"),
            TextContent(text="It says out.", citations=[cite]),
            VendorContent(api=API, data={"type": "compaction", "content": "summary"}),
        ],
    )
    payload, _ = await send(Context(messages=[UserMessage(content="Run."), answer]))
    blocks = payload["messages"][1]["content"]
    assert blocks == [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "bash_code_execution",
            "input": {"command": "ls"},
        },
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": {
                "type": "bash_code_execution_result",
                "stdout": "out",
                "stderr": "",
                "return_code": 0,
                "content": [{"type": "bash_code_execution_output", "file_id": "file_1"}],
            },
        },
        {
            "type": "text",
            "text": "It says out.",
            "citations": [
                {
                    "type": "web_search_result_location",
                    "url": "https://a.example",
                    "title": "A",
                    "cited_text": "a fact",
                    "encrypted_index": "",
                }
            ],
        },
        {"type": "compaction", "content": "summary"},
    ]
    assert payload["container"] == "container_1"


async def test_an_approval_request_cannot_go_back_and_says_so() -> None:
    said: dict[str, Any] = {"api": API, "provider": "contract", "model": "contract-model"}
    odd = AssistantMessage(
        **said, content=[stream_core.ApprovalRequest(id="mcpr_1", name="ask", arguments={})]
    )
    with pytest.raises(ValueError, match="cannot take back a ApprovalRequest"):
        await send(Context(messages=[UserMessage(content="Hi."), odd]))


async def test_claude_on_vertex_sends_the_same_blocks_and_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Vertex AI's Claude shares the request builder: its own answers' server blocks and
    container go back, and server tools are asked for the same way."""
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    model = stream_core.get_model("anthropic-vertex", "claude-sonnet-4-5@20250929")
    said: dict[str, Any] = {"api": API, "provider": model.provider, "model": model.id}
    call = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
            "input": {"query": "a"}}  # fmt: skip
    answer = AssistantMessage(
        **said,
        container={"id": "container_v"},
        content=[ServerToolCall(id="srvtoolu_1", name="web_search", kind="web_search", raw=call)],
    )
    context = Context(
        messages=[UserMessage(content="Search."), answer, UserMessage(content="More.")],
        tools=[ServerTool(kind="web_search", max_uses=1)],
    )
    with respx.mock(assert_all_mocked=True) as router:
        route = router.route(host="us-east5-aiplatform.googleapis.com").mock(
            return_value=sse_response([OK_BODY])
        )
        reply = await stream_core.complete(
            model, context, stream_core.StreamOptions(headers={"authorization": "Bearer t"})
        )
    assert reply.error is None, reply.error
    payload = json.loads(route.calls[0].request.content)
    assert payload["messages"][1]["content"] == [call]
    assert payload["container"] == "container_v"
    assert payload["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
    ]
