"""Issue 35 on the Messages API: block shapes the recordings do not show (MCP calls and
results, blocks this version has no type for, a whole answer with citations) are kept,
stream under the grammar, and odd vendor values end in a valid message."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from stream_core import (
    FileContent,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ToolCall,
    VendorContent,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import Run, options, run_provider, sse_response

API = "anthropic-messages"


def _ev(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _block(index: int, block: dict[str, Any], *deltas: dict[str, Any]) -> bytes:
    out = _ev("content_block_start", index=index, content_block=block)
    for d in deltas:
        out += _ev("content_block_delta", index=index, delta=d)
    return out + _ev("content_block_stop", index=index)


def _run(*events: bytes, stop: str = "end_turn", usage: Any = None) -> Run:
    body = _ev("message_start", message={"id": "msg_1", "usage": {"input_tokens": 5}})
    body += b"".join(events)
    body += _ev("message_delta", delta={"stop_reason": stop}, usage=usage or {"output_tokens": 3})
    body += _ev("message_stop")

    async def main() -> Run:
        return await run_provider(API, [sse_response([body])], opts=options())

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


def test_an_mcp_call_and_its_result_are_kept() -> None:
    call = {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "ask", "server_name": "wiki",
            "input": {}}  # fmt: skip
    result = {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False,
              "content": [{"type": "text", "text": "42"}]}  # fmt: skip
    run = _run(
        _block(0, call, {"type": "input_json_delta", "partial_json": '{"q": "answer"}'}),
        _block(1, result),
    )
    got_call, got_result = run.message.content
    assert isinstance(got_call, ServerToolCall)
    assert (got_call.kind, got_call.name, got_call.input) == ("mcp", "ask", {"q": "answer"})
    assert got_call.raw == {**call, "input": {"q": "answer"}}
    assert isinstance(got_result, ServerToolResult)
    assert (got_result.kind, got_result.name, got_result.text) == ("mcp", "ask", "42")
    assert got_result.raw == result and run.message.stop_reason == "stop"


def test_a_block_of_an_unknown_type_is_kept_with_its_deltas() -> None:
    run = _run(
        _block(
            0,
            {"type": "compaction", "content": None},
            {"type": "compaction_delta", "content": "Summary "},
            {"type": "compaction_delta", "content": "so far."},
        ),  # fmt: skip
        _block(1, {"type": "container_upload", "file_id": "file_1"}),
        _block(2, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Hi."}),
    )
    first, second, text = run.message.content
    assert first == VendorContent(
        api=API, data={"type": "compaction", "content": "Summary so far."}
    )
    assert second == VendorContent(api=API, data={"type": "container_upload", "file_id": "file_1"})
    assert isinstance(text, TextContent) and text.text == "Hi."
    kinds = [getattr(e, "delta", e).type for e in run.events]
    assert kinds.count("block_start") == 2 and kinds.count("block_end") == 2


def test_a_programmatic_call_keeps_its_caller_and_ends_tool_use() -> None:
    caller = {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"}
    run = _run(
        _block(
            0,
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "code_execution",
                "input": {"code": "print(lookup())"},
            },
        ),  # fmt: skip
        _block(
            1,
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}, "caller": caller},
        ),  # fmt: skip
        stop="tool_use",
    )
    server, client = run.message.content
    assert isinstance(server, ServerToolCall) and server.input == {"code": "print(lookup())"}
    assert isinstance(client, ToolCall) and client.caller == caller
    assert run.message.stop_reason == "tool_use"


def test_server_tool_counts_keep_vendor_names_without_a_kind() -> None:
    usage = {"output_tokens": 3, "server_tool_use": {"web_search_requests": 3,
             "web_fetch_requests": 0, "code_execution_requests": 1, "odd": "x"}}  # fmt: skip
    run = _run(usage=usage)
    assert run.message.usage.server_tools == {"web_search": 3, "code_execution": 1}


@pytest.mark.parametrize(
    "block",
    [
        {"type": "web_search_tool_result", "tool_use_id": "s", "content": 7},
        {"type": "web_search_tool_result", "tool_use_id": "s", "content": [1, {"url": 2}]},
        {"type": "tool_search_tool_result", "tool_use_id": "s",
         "content": {"type": "tool_search_tool_search_result", "tool_references": 5}},
        {"type": "bash_code_execution_tool_result", "tool_use_id": "s",
         "content": {"stdout": 1, "return_code": "0", "content": [{"file_id": 3}]}},
        {"type": "web_fetch_tool_result", "tool_use_id": "s",
         "content": {"type": "web_fetch_result", "content": "page"}},
        {"type": "future_tool_result", "tool_use_id": "s", "content": {"error_code": 9}},
    ],
)  # fmt: skip
def test_odd_result_contents_are_kept_verbatim(block: dict[str, Any]) -> None:
    run = _run(_block(0, block))
    assert run.message.error is None, run.message.error
    (result,) = run.message.content
    assert isinstance(result, ServerToolResult) and result.raw == block


@pytest.mark.parametrize(
    "events",
    [
        _block(0, {"type": "text", "text": ""}, {"type": "citations_delta", "citation": 3}),
        _block(0, {"type": "server_tool_use", "id": 5, "name": "web_search", "input": {}}),
        _block(0, {"type": "server_tool_use", "id": "s", "name": "x", "caller": "direct"}),
        _block(
            0,
            {"type": "server_tool_use", "id": "s", "name": "x", "input": {}},
            {"type": "input_json_delta", "partial_json": 5},
        ),  # fmt: skip
    ],
)
def test_wrong_types_end_the_stream_protocol(events: bytes) -> None:
    run = _run(events)
    assert run.message.stop_reason == "error" and run.message.error is not None
    assert run.message.error.kind == "protocol"


def test_a_file_a_code_run_wrote_follows_its_result() -> None:
    result = {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_1",
              "content": {"type": "code_execution_result", "stdout": "", "stderr": "oops",
                          "return_code": 1, "content": [
                              {"type": "code_execution_output", "file_id": "file_a"}]}}  # fmt: skip
    run = _run(_block(0, result))
    got, file = run.message.content
    assert isinstance(got, ServerToolResult)
    assert (got.text, got.exit_code, got.is_error) == ("oops", 1, False)
    assert file == FileContent(file_id="file_a", call_id="srvtoolu_1")


def test_a_whole_answer_keeps_its_server_blocks_and_citations() -> None:
    import httpx

    cite = {"type": "web_search_result_location", "url": "https://a.example", "title": "A",
            "cited_text": "a fact", "encrypted_index": "ei"}  # fmt: skip
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "a"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://a.example",
                        "title": "A",
                        "encrypted_content": "ec",
                    }
                ],
            },
            {"type": "text", "text": "A fact.", "citations": [cite]},
        ],  # fmt: skip
        "stop_reason": "end_turn",
        "container": {"id": "container_1"},
        "usage": {
            "input_tokens": 5,
            "output_tokens": 2,
            "server_tool_use": {"web_search_requests": 1},
        },
    }

    async def main() -> Run:
        return await run_provider(API, [httpx.Response(200, json=body)], opts=options())

    message = anyio.run(main).message
    call, result, text = message.content
    assert isinstance(call, ServerToolCall) and call.input == {"query": "a"}
    assert call.raw == body["content"][0]  # type: ignore[index]
    assert isinstance(result, ServerToolResult) and result.sources[0].url == "https://a.example"
    assert isinstance(text, TextContent) and text.citations
    assert text.citations[0].raw == cite and text.citations[0].cited_text == "a fact"
    assert message.container == {"id": "container_1"}
    assert message.usage.server_tools == {"web_search": 1}
