"""The testing kit scripts what a vendor runs and makes itself (issue 35): a web search
with results and a cited answer, files, approvals and vendor blocks stream through the
faux model as a vendor's would, keep every field, and survive JSONL and `vendor_bytes`'
reading of the turn."""

from __future__ import annotations

import base64
import io
from typing import Any

import anyio
import pytest

import stream_core
from stream_core import (
    ApprovalRequest,
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    Source,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
    Usage,
    UserMessage,
    VendorContent,
    dump_messages,
    load_messages,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import check_expect
from stream_core.testing import (
    faux_content,
    faux_message,
    faux_model,
    faux_server_message,
    faux_server_tool,
    faux_web_search,
    vendor_bytes,
)
from stream_core.testing._codec import read_turn

SOURCES = [("https://meteo.example/paris", "Paris forecast"), "https://news.example/heat"]
VOLATILE = {"timestamp", "ttft_ms", "duration_ms", "model", "raw_stop_reason"}


def _run(model: Any) -> tuple[list[Any], AssistantMessage]:
    async def main() -> tuple[list[Any], AssistantMessage]:
        context = Context(messages=[UserMessage(content="Weather in Paris?")])
        async with stream_core.stream(model, context) as s:
            events = [e async for e in s]
            return events, await s.result()

    return anyio.run(main)


def _kinds(events: list[Any]) -> list[str]:
    return [getattr(e, "delta", e).type for e in events]


def _same(got: AssistantMessage, want: AssistantMessage) -> None:
    assert got.model_dump(mode="json", exclude=VOLATILE) == want.model_dump(
        mode="json", exclude=VOLATILE
    )


def every_block_message() -> AssistantMessage:
    """A message holding every assistant block kind, each with its optional fields."""
    return AssistantMessage(
        api="faux",
        provider="faux",
        model="faux",
        content=[
            ThinkingContent(thinking="", signature="opaque==", redacted=True),
            ServerToolCall(
                id="srv_1",
                name="web_search",
                kind="web_search",
                input={"query": "Paris weather"},
                raw={"type": "server_tool_use", "id": "srv_1", "encrypted": "Zm9v"},
            ),
            ServerToolResult(
                call_id="srv_1",
                name="web_search",
                kind="web_search",
                sources=[Source(url="https://meteo.example/paris", title="Paris forecast")],
                raw={"type": "web_search_tool_result", "content": [{"encrypted_content": "YmFy"}]},
            ),
            ServerToolCall(
                id="srv_2",
                name="code_execution",
                kind="code_execution",
                input={"code": "print(1)"},
                caller={"type": "direct"},
            ),
            ServerToolResult(
                call_id="srv_2", kind="code_execution", text="1\n", exit_code=0, is_error=False
            ),
            FileContent(
                data=base64.b64encode(b"\x89PNG\r\n").decode(),
                mime_type="image/png",
                name="plot.png",
                call_id="srv_2",
            ),
            FileContent(file_id="file_abc", call_id="srv_2"),
            TextContent(
                text="Sunny, 24 °C — «clear» skies.",
                text_signature="msg_1",
                citations=[
                    Citation(
                        url="https://meteo.example/paris", title="Paris forecast", start=0, end=5
                    ),
                    Citation(document_index=0, cited_text="24 °C", raw={"type": "char_location"}),
                ],
            ),
            ApprovalRequest(
                id="mcpr_1", name="create_short_url", server="zip1", arguments={"url": "x"}
            ),
            VendorContent(api="faux", data={"type": "compaction", "encrypted": "ZW5j"}),
            ToolCall(
                id="call_1",
                name="shell",
                arguments={"commands": ["ls"]},
                builtin="shell_call",
                raw={"type": "shell_call", "id": "sh_1", "call_id": "call_1"},
                caller={"type": "program", "caller_id": "cm_1"},
                thought_signature="c2ln",
            ),
        ],
        usage=Usage(input=10, output=20, server_tools={"web_search": 1, "code_execution": 1}),
        container={"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
        stop_reason="tool_use",
    )


# --- a web search, offline ----------------------------------------------------------------


def test_a_scripted_web_search_streams_its_blocks_and_citations_in_order() -> None:
    turn = faux_web_search("weather in Paris", SOURCES, "Sunny, 24 °C.")
    events, message = _run(faux_model([turn], chunk_size=4))
    assert_valid_event_stream(events)
    kinds = _kinds(events)
    assert kinds[:5] == ["message_start", "block_start", "block_end", "block_start", "block_end"]
    text = kinds[5:]
    assert text[0] == "text_start" and text[-2:] == ["text_end", "message_end"]
    assert text.count("citation") == 2
    # The citations arrive with their text: after its deltas, before it ends.
    assert text.index("citation") > text.index("text_delta")
    starts = [getattr(e, "delta", None) for e in events if _kinds([e]) == ["block_start"]]
    assert [d.kind for d in starts] == ["server_tool_call", "server_tool_result"]

    want = faux_server_message(
        "web_search",
        {"query": "weather in Paris"},
        sources=SOURCES,
        text="Sunny, 24 °C.",
        citations=True,
    )
    _same(message, want)
    call, result, answer = message.content
    assert isinstance(call, ServerToolCall) and call.kind == "web_search"
    assert isinstance(result, ServerToolResult) and result.call_id == call.id
    assert [s.title for s in result.sources] == ["Paris forecast", None]
    assert isinstance(answer, TextContent)
    assert [c.url for c in answer.citations or ()] == [
        "https://meteo.example/paris",
        "https://news.example/heat",
    ]
    assert (answer.citations or [])[0].title == "Paris forecast"
    assert message.usage.server_tools == {"web_search": 1}
    assert message.stop_reason == "stop"


def test_faux_server_tool_takes_a_result_text_citations_and_a_vendor_name() -> None:
    turn = faux_server_tool(
        "code_runner",
        {"code": "print(2 + 2)"},
        result="4\n",
        text="It prints 4.",
        citations=[Citation(cited_text="4", start=10, end=11)],
        usage=Usage(output=3, server_tools={"code_runner": 2}),
        container={"id": "c_9"},
    )
    _, message = _run(faux_model([turn]))
    call, result, answer = message.content
    assert isinstance(call, ServerToolCall) and (call.name, call.kind) == ("code_runner", None)
    assert isinstance(result, ServerToolResult) and result.text == "4\n"
    assert isinstance(answer, TextContent) and answer.citations is not None
    assert answer.text[answer.citations[0].start : answer.citations[0].end] == "4"
    assert message.usage.server_tools == {"code_runner": 2}  # counted by the caller
    assert message.container == {"id": "c_9"}


def test_faux_web_search_without_citations_and_a_whole_result() -> None:
    given = ServerToolResult(is_error=True, text="too_many_requests")
    turn = faux_server_tool("web_search", {"query": "x"}, id="s_1", result=given, text="Sorry.")
    _, message = _run(faux_model([turn]))
    result = message.content[1]
    assert isinstance(result, ServerToolResult)
    assert (result.call_id, result.is_error, result.text) == ("s_1", True, "too_many_requests")
    text = message.content[2]
    assert isinstance(text, TextContent) and text.citations is None
    _, plain = _run(faux_model([faux_web_search("q", SOURCES, "A.", cite=False)]))
    assert isinstance(plain.content[2], TextContent) and plain.content[2].citations is None


def test_every_new_block_streams_back_as_scripted() -> None:
    want = every_block_message()
    events, message = _run(faux_model([want], chunk_size=3))
    assert_valid_event_stream(events)
    _same(message, want)
    kinds = [
        d.kind for d in (getattr(e, "delta", None) for e in events) if d and d.type == "block_start"
    ]
    assert kinds == [
        "server_tool_call",
        "server_tool_result",
        "server_tool_call",
        "server_tool_result",
        "file",
        "file",
        "approval_request",
        "vendor",
    ]
    assert _kinds(events).count("citation") == 2


def test_faux_content_scripts_any_blocks() -> None:
    blocks = [FileContent(data="aGk=", mime_type="text/plain"), TextContent(text="Here.")]
    _, message = _run(faux_model([faux_content(blocks, usage=Usage(output=2))]))
    assert [b.type for b in message.content] == ["file", "text"]
    assert message.usage.output == 2


def test_a_citation_before_its_text_starts_the_block() -> None:
    turn = faux_content([TextContent(text="", citations=[Citation(url="https://a.example")])])
    events, message = _run(faux_model([turn]))
    assert_valid_event_stream(events)
    assert message.content == [TextContent(text="", citations=[Citation(url="https://a.example")])]


def test_an_unknown_block_cannot_be_scripted() -> None:
    message = AssistantMessage.model_construct(
        **{**every_block_message().__dict__, "content": [UnknownContent({"type": "future"})]}
    )
    with pytest.raises(ValueError, match="'future'.*cannot be scripted"):
        faux_message(message)


# --- JSONL --------------------------------------------------------------------------------


def test_jsonl_keeps_every_new_block_byte_stable() -> None:
    message = every_block_message()
    first = io.StringIO()
    dump_messages([message], first)
    loaded = load_messages(io.StringIO(first.getvalue()))
    assert loaded == [message]
    again = io.StringIO()
    dump_messages(loaded, again)
    assert again.getvalue() == first.getvalue()
    # and the streamed copy writes the same bytes as the scripted one
    _, streamed = _run(faux_model([message]))
    line = io.StringIO()
    dump_messages(
        [
            streamed.model_copy(
                update={
                    "model": "faux",
                    "raw_stop_reason": None,
                    "timestamp": message.timestamp,
                    "ttft_ms": None,
                    "duration_ms": None,
                }
            )
        ],
        line,
    )
    assert line.getvalue() == first.getvalue()


# --- vendor_bytes' reading of a turn ------------------------------------------------------


def test_read_turn_types_the_new_frames() -> None:
    message = every_block_message()
    turn = read_turn(faux_message(message), "anthropic-messages")
    kinds = [b.kind for b in turn.blocks]
    assert kinds == ["thinking", *["block"] * 6, "text", "block", "block", "tool"]
    assert turn.blocks[0].redacted and turn.blocks[0].signature == "opaque=="
    assert [b.data for b in turn.blocks if b.kind == "block"] == [
        b for b in message.content if b.type not in ("text", "thinking", "tool_call")
    ]
    text = turn.blocks[7]
    assert text.citations == message.content[7].citations  # type: ignore[union-attr]
    assert text.text_signature == "msg_1"
    tool = turn.blocks[-1]
    assert tool.tool == {
        "thought_signature": "c2ln",
        "caller": {"type": "program", "caller_id": "cm_1"},
        "builtin": "shell_call",
        "raw": {"type": "shell_call", "id": "sh_1", "call_id": "call_1"},
    }
    assert turn.server_tools == {"web_search": 1, "code_execution": 1}
    assert turn.container == message.container
    assert turn.stop == "tool_use"


def test_the_synthesized_expect_lists_the_new_blocks() -> None:
    turn = faux_web_search("q", SOURCES, "A.")
    expect = vendor_bytes(turn, "anthropic-messages").meta["expect"]
    assert expect["content"] == [
        {
            "type": "server_tool_call",
            "id": "srvtoolu_faux_web_search",
            "name": "web_search",
            "kind": "web_search",
        },
        {"type": "server_tool_result", "call_id": "srvtoolu_faux_web_search"},
        {"type": "text", "text": "A.", "citations": 2},
    ]
    # ... in the shape check_expect compares: the scripted message meets it
    check_expect(
        faux_server_message(
            "web_search", {"query": "q"}, sources=SOURCES, text="A.", citations=True
        ),
        expect,
    )
    with pytest.raises(AssertionError, match="citations"):
        check_expect(
            faux_server_message("web_search", {"query": "q"}, sources=SOURCES, text="A."), expect
        )
    wrong = {"content": [{"type": "server_tool_call", "id": "other"}], "content_partial": True}
    with pytest.raises(AssertionError, match="not found"):
        check_expect(faux_server_message("web_search", {"query": "q"}), wrong)
