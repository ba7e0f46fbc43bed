"""`check_modern` (contract_tests/modern.py) on hand-built messages: each modern `expect`
field of the recordings (fixtures/INDEX.md, "Modern-feature fields (kinds)") passes when our
blocks keep it, and fails naming the field and what was found when they do not."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from stream_core import (
    ApprovalRequest,
    AssistantMessage,
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    VendorContent,
)
from stream_core.contract_tests.modern import check_modern, has_modern, same

LONG = "x" * 5000
STAND_IN = {"sha256": hashlib.sha256(LONG.encode()).hexdigest(), "length": 5000, "prefix": "xxx"}


def _message(*content: Any, **fields: Any) -> AssistantMessage:
    return AssistantMessage(api="t", provider="t", model="t", content=list(content), **fields)


def _fails(message: AssistantMessage, expect: dict[str, Any], *words: str) -> str:
    with pytest.raises(AssertionError) as caught:
        check_modern(message, expect)
    text = str(caught.value)
    for word in words:
        assert word in text, text
    return text


def test_same_compares_stand_ins_by_sha256() -> None:
    assert same({"a": [LONG, 1]}, {"a": [STAND_IN, 1]}) is None
    assert "a[0]" in (same({"a": ["short", 1]}, {"a": [STAND_IN, 1]}) or "")
    assert "keys missing ['b']" in (same({"a": 1}, {"a": 1, "b": 2}) or "")
    assert same(True, 1) is not None


def test_has_modern() -> None:
    assert has_modern({"citations": []}) and not has_modern({"content": [], "blocks": []})


# --- server tools ------------------------------------------------------------------------

ANTHROPIC_TOOL = {
    "id": "srvtoolu_1",
    "vendor_type": "server_tool_use",
    "name": "code_execution",
    "input": {"code": STAND_IN},
    "caller": {"type": "direct"},
    "result": {"vendor_type": "code_execution_tool_result", "content": {"stdout": "4"}},
}


def _anthropic_blocks(**changes: Any) -> list[Any]:
    call = ServerToolCall(
        id="srvtoolu_1", name="code_execution", input={"code": LONG}, caller={"type": "direct"}
    )
    result = ServerToolResult(
        call_id="srvtoolu_1",
        raw={
            "type": "code_execution_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": {"stdout": "4"},
        },
    )
    return [call.model_copy(update=changes), result]


def test_anthropic_server_tools() -> None:
    check_modern(_message(*_anthropic_blocks()), {"server_tools": [ANTHROPIC_TOOL]})
    _fails(
        _message(*_anthropic_blocks(input={"code": "short"})),
        {"server_tools": [ANTHROPIC_TOOL]},
        "expect.server_tools[0]",
        "input.code",
    )
    _fails(_message(*_anthropic_blocks(caller=None)), {"server_tools": [ANTHROPIC_TOOL]}, "caller")
    _fails(
        _message(_anthropic_blocks()[0]),
        {"server_tools": [ANTHROPIC_TOOL]},
        "no ServerToolResult for this call",
    )
    _fails(_message(), {"server_tools": [ANTHROPIC_TOOL]}, "no ServerToolCall with this id")


def test_anthropic_results_across_messages() -> None:
    deferred = {**ANTHROPIC_TOOL, "result": None, "result_in_this_message": False}
    check_modern(_message(_anthropic_blocks()[0]), {"server_tools": [deferred]})
    late = {**ANTHROPIC_TOOL, "name": None, "input": None, "call_in_this_message": False}
    check_modern(_message(_anthropic_blocks()[1]), {"server_tools": [late]})


RESPONSES_ITEM = {
    "item_id": "ws_1",
    "vendor_type": "web_search_call",
    "item": {"id": "ws_1", "type": "web_search_call", "action": {"query": "q"}, "blob": STAND_IN},
}


def test_responses_server_items_in_raw_or_vendor_data() -> None:
    item = {"id": "ws_1", "type": "web_search_call", "action": {"query": "q"}, "blob": LONG}
    check_modern(_message(ServerToolCall(id="ws_1", raw=item)), {"server_tools": [RESPONSES_ITEM]})
    check_modern(_message(VendorContent(api="t", data=item)), {"server_tools": [RESPONSES_ITEM]})
    changed = {**item, "action": {"query": "other"}}
    _fails(
        _message(ServerToolCall(id="ws_1", raw=changed)),
        {"server_tools": [RESPONSES_ITEM]},
        "web_search_call ws_1",
        "item.action.query",
    )
    _fails(
        _message(ServerToolCall(id="ws_2", raw={**item, "id": "ws_2"})),
        {"server_tools": [RESPONSES_ITEM]},
        "no block keeps this item",
        "ws_2",
    )


def test_gemini_tool_parts() -> None:
    entry = {
        "id": "t1",
        "vendor_type": "toolCall",
        "tool_type": "FILE_SEARCH",
        "call": {"toolType": "FILE_SEARCH", "id": "t1"},
        "result": {"vendor_type": "toolResponse", "value": {"toolType": "FILE_SEARCH", "id": "t1"}},
    }
    part = {"toolCall": {"toolType": "FILE_SEARCH", "id": "t1"}, "thoughtSignature": "s"}
    answer = {"toolResponse": {"toolType": "FILE_SEARCH", "id": "t1"}}
    ok = _message(ServerToolCall(id="t1", raw=part), ServerToolResult(call_id="t1", raw=answer))
    check_modern(ok, {"server_tools": [entry]})
    _fails(
        _message(ServerToolCall(id="t1", raw=part)),
        {"server_tools": [entry]},
        "no ServerToolResult keeps the toolResponse",
    )


# --- caller-run built-ins and approvals ---------------------------------------------------


def test_client_builtin_calls() -> None:
    entry = {"call_id": "call_1", "item_id": "sh_1", "vendor_type": "shell_call", "input": {}}
    call = ToolCall(id="call_1", name="shell", builtin="shell_call", raw={"id": "sh_1"})
    check_modern(_message(call, stop_reason="tool_use"), {"client_builtin_calls": [entry]})
    text = _fails(
        _message(call.model_copy(update={"builtin": None})),
        {"client_builtin_calls": [entry]},
        "builtin None",
        "not tool_use",
    )
    assert "expect.client_builtin_calls[0]" in text


def test_approval_requests() -> None:
    entry = {"id": "mcpr_1", "name": "shorten", "server_label": "zip1", "arguments": {"u": 1}}
    asked = ApprovalRequest(id="mcpr_1", name="shorten", server="zip1", arguments={"u": 1})
    check_modern(_message(asked), {"approval_requests": [entry]})
    _fails(
        _message(asked.model_copy(update={"server": None})),
        {"approval_requests": [entry]},
        "server None, expected 'zip1'",
    )


# --- citations and grounding --------------------------------------------------------------


def test_anthropic_citations_cover_their_text_block() -> None:
    record = {"type": "web_search_result_location", "url": "https://a", "encrypted_index": "e"}
    entry = {"content_index": 2, "vendor_block_index": 3, "span_text": "76°F", "citation": record}
    block = TextContent(text="76°F", citations=[Citation(url="https://a", raw=record)])
    check_modern(_message(block), {"citations": [entry]})
    other = TextContent(text="Sunny and 76°F", citations=[Citation(url="https://a", raw=record)])
    _fails(_message(other), {"citations": [entry]}, "expected the text")
    unkept = TextContent(text="76°F", citations=[Citation(url="https://a")])
    _fails(_message(unkept), {"citations": [entry]}, "no Citation keeps the vendor record")


def test_responses_annotations_by_span_or_point() -> None:
    url = {"type": "url_citation", "start_index": 6, "end_index": 11, "url": "https://a"}
    point = {"type": "file_citation", "file_id": "f", "index": 11}
    expect = {
        "citations": [
            {"item_id": "msg", "part_index": 0, "annotation": url, "span_text": "world"},
            {"item_id": "msg", "part_index": 0, "annotation": point, "text_before_index": "o wor"},
        ]
    }
    cites = [Citation(url="https://a", start=6, end=11, raw=url), Citation(file_id="f", raw=point)]
    check_modern(_message(TextContent(text="hello world!", citations=cites)), expect)
    shifted = [cites[0].model_copy(update={"start": 5, "end": 10}), cites[1]]
    _fails(_message(TextContent(text="hello world!", citations=shifted)), expect, "span")


def test_chat_citations_by_marker() -> None:
    expect = {
        "citations": [{"marker": "[1]", "url": "https://a"}, {"marker": "[2]", "url": "https://b"}]
    }
    cites = [Citation(url="https://a", start=4, end=7), Citation(url="https://b")]
    check_modern(_message(TextContent(text="Hi. [1]", citations=cites)), expect)
    _fails(
        _message(TextContent(text="Hi. [1]", citations=cites[:1])),
        expect,
        "[2] https://b",
        "no citation of this URL",
    )


def test_grounding_supports_are_citation_spans() -> None:
    support = {"start": 0, "end": 6, "text": "Paris.", "chunk_indices": [0]}
    expect = {"grounding": {"metadata": {}, "supports": [support]}}
    block = TextContent(text="Paris. More.", citations=[Citation(title="doc", start=0, end=6)])
    check_modern(_message(block), expect)
    _fails(_message(TextContent(text="Paris. More.")), expect, "expect.grounding.supports[0]")


# --- files, opaque state, counts, container -----------------------------------------------


def test_files_by_id_or_bytes() -> None:
    png = b"\x89PNG\r\n\x1a\n"
    expect = {
        "files": [
            {"file_id": "file_1", "tool_use_id": "srv", "media_type": None, "bytes": None},
            {
                "item_id": "ig_1",
                "media_type": "image/png",
                "sha256": hashlib.sha256(png).hexdigest(),
            },
        ]
    }
    data = base64.b64encode(png).decode()
    files = [FileContent(file_id="file_1"), FileContent(data=data, mime_type="image/png")]
    check_modern(_message(*files), expect)
    _fails(
        _message(files[0], FileContent(data=data, mime_type="image/jpeg")),
        expect,
        "expect.files[1]",
        "mime_type 'image/jpeg'",
    )
    _fails(_message(files[1]), expect, "no FileContent with file_id file_1")


def test_reasoning_opaque_survives_somewhere() -> None:
    expect = {
        "reasoning_opaque": [
            {"content_index": 0, "vendor_type": "thinking", "signature": "sig=="},
            {
                "item_id": "rs_1",
                "summary": [],
                "encrypted_content": "old",
                "encrypted_content_in_response_completed": STAND_IN,
            },
            {"part": "toolCall", "thoughtSignature": "ts"},
        ]
    }
    kept = _message(
        ThinkingContent(thinking="t", signature="sig=="),
        ThinkingContent(thinking="", signature=LONG, redacted=True),
        ServerToolCall(id="t1", raw={"toolCall": {}, "thoughtSignature": "ts"}),
    )
    check_modern(kept, expect)
    _fails(
        _message(ThinkingContent(thinking="t")),
        expect,
        "signature",
        "encrypted_content",
        "thoughtSignature",
    )


def test_server_tool_usage_where_a_counter_names_a_kind() -> None:
    anthropic = {"server_tool_usage": {"web_search_requests": 2, "web_fetch_requests": 0}}
    check_modern(_message(usage=Usage(server_tools={"web_search": 2})), anthropic)
    _fails(
        _message(usage=Usage(server_tools={"web_search": 1})),
        anthropic,
        "usage.server_tools['web_search'] = 1, expected 2",
    )
    responses = {
        "server_tool_usage": {
            "tool_usage": {"web_search": {"num_requests": 1}, "image_gen": {"input_tokens": 9}}
        }
    }
    check_modern(_message(usage=Usage(server_tools={"web_search": 1})), responses)
    check_modern(_message(), {"server_tool_usage": {"toolUsePromptTokenCount": 771}})
    _fails(_message(), {"server_tool_usage": {"num_server_side_tools_used": 3}}, "3 server tool")


def test_container() -> None:
    check_modern(_message(container={"id": "c1", "x": 1}), {"container": {"id": "c1"}})
    _fails(_message(), {"container": {"id": "c1"}}, "expect.container", "None")


def test_every_problem_is_listed() -> None:
    expect = {"container": {"id": "c1"}, "approval_requests": [{"id": "a"}]}
    assert _fails(_message(), expect).count("\n- ") == 2
