"""The handoff of issue 35's blocks, on its own (no provider): what `prepare_messages`
hands a request builder, and where a compaction may cut.

To the same API and provider every block is kept as it is; to another, server calls with
their results become one compact note keeping the sources, cited text keeps its sources as
text, a generated file becomes a note, approvals become text on both sides, vendor blocks
become text, and a built-in call becomes a plain call. Server calls are no function calls:
the pairing repair neither answers nor drops them, and a compaction never cuts between a
server call and its result.
"""

from __future__ import annotations

from typing import Any

from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    Message,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core._content import Source
from stream_core._history.compaction import compact, compaction_cut
from stream_core._history.handoff import prepare_messages
from stream_core._tools import audit_tool_pairs, repair_tool_pairs

ANTHROPIC: dict[str, Any] = {
    "api": "anthropic-messages",
    "provider": "anthropic",
    "model_id": "claude-sonnet-4-5",
}
RESPONSES: dict[str, Any] = {"api": "openai-responses", "provider": "openai", "model_id": "gpt-5"}


def by(target: dict[str, Any], *content: Any, model: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        content=list(content),
        api=target["api"],
        provider=target["provider"],
        model=model or target["model_id"],
    )


def prepare(target: dict[str, Any], *messages: Any) -> list[Any]:
    return prepare_messages(Context(messages=list(messages)), **target)


CALL = ServerToolCall(
    id="srvtoolu_1",
    name="web_search",
    kind="web_search",
    input={"query": "paris weather"},
    raw={"type": "server_tool_use", "id": "srvtoolu_1"},
)
RESULT = ServerToolResult(
    call_id="srvtoolu_1",
    name="web_search",
    kind="web_search",
    sources=[
        Source(url="https://meteo.test/paris", title="Paris forecast"),
        Source(url="https://news.test/sun", title="Sunny week"),
    ],
    raw={"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
)
CITED = TextContent(
    text="It is sunny.",
    citations=[
        Citation(
            url="https://meteo.test/paris",
            title="Paris forecast",
            cited_text="sunny all week",
            raw={"type": "web_search_result_location", "encrypted_index": "Eo"},
        )
    ],
)


def texts(message: Any) -> list[str]:
    assert all(isinstance(b, TextContent) for b in message.content), message.content
    return [b.text for b in message.content]


def test_a_server_call_and_its_result_become_one_note_keeping_the_sources() -> None:
    said = by(ANTHROPIC, CALL, RESULT, CITED)
    out = prepare(RESPONSES, UserMessage(content="weather?"), said)
    note, answer = texts(out[1])
    assert note.startswith("[server tool call web_search: ")
    assert "paris weather" in note
    assert "- Paris forecast <https://meteo.test/paris>" in note
    assert "- Sunny week <https://news.test/sun>" in note
    assert "server tool result" not in note  # the call's header serves both
    assert answer == (
        'It is sunny. [sources: Paris forecast <https://meteo.test/paris>: "sunny all week"]'
    )
    assert "encrypted" not in repr(out[1])
    # The caller's history is not changed.
    assert said.content == [CALL, RESULT, CITED]


def test_a_failed_server_call_says_so_and_a_result_alone_keeps_its_own_header() -> None:
    failed = RESULT.model_copy(update={"is_error": True, "sources": [], "text": "max_uses"})
    (note,) = texts(prepare(RESPONSES, UserMessage(content="q"), by(ANTHROPIC, CALL, failed))[1])
    assert note.endswith("(error)]\nmax_uses")
    # A result whose call is in an earlier message (a paused turn continued).
    out = prepare(
        RESPONSES,
        UserMessage(content="q"),
        by(ANTHROPIC, CALL),
        by(ANTHROPIC, RESULT, TextContent(text="done")),
    )
    assert texts(out[1]) == [CALL.as_text()]
    assert texts(out[2])[0].startswith("[server tool result web_search]\n- Paris forecast")


def test_the_same_api_and_provider_keeps_every_block_as_it_is() -> None:
    made = FileContent(file_id="file_1", mime_type="image/png", name="plot.png", call_id="s")
    vendor = VendorContent(api="anthropic-messages", data={"type": "future"})
    call = ToolCall(id="toolu_1", name="f", caller={"type": "code_execution_20250825"})
    message = by(ANTHROPIC, CALL, RESULT, CITED, made, vendor, call, model="claude-opus-4-1")
    out = prepare(
        ANTHROPIC,
        UserMessage(content="q"),
        message,
        ToolResultMessage(tool_call_id="toolu_1", tool_name="f", content=[]),
    )
    assert out[1].content == message.content
    assert out[1].content[0] is CALL and out[1].content[2] is CITED


def test_a_generated_file_becomes_a_note_with_its_name_and_type() -> None:
    made = FileContent(data="iVBORw0KGgo=", mime_type="image/png", name="plot.png", call_id="s")
    by_id = FileContent(file_id="file_9", mime_type="text/csv", call_id="s")
    out = prepare(ANTHROPIC, UserMessage(content="plot"), by(RESPONSES, made, by_id))
    first, second = texts(out[1])
    assert first.startswith("[file: plot.png, image/png")
    assert second == "[file: file_9, text/csv]"


def test_approvals_to_another_api_are_text_on_both_sides() -> None:
    request = ApprovalRequest(
        id="mcpr_1",
        name="create_issue",
        server="github",
        arguments={"title": "bug"},
        raw={"type": "mcp_approval_request", "id": "mcpr_1"},
    )
    answer = UserMessage(content=[ApprovalResponse(request_id="mcpr_1", approve=True)])
    history = [UserMessage(content="file it"), by(RESPONSES, request), answer]

    out = prepare(ANTHROPIC, *history)
    assert texts(out[1]) == ['[approval asked for create_issue on github: {"title": "bug"}]']
    assert texts(out[2]) == ["[approved: mcpr_1]"]

    # The same API and provider: the vendor's own items, both.
    same = prepare(RESPONSES, *history)
    assert same[1].content == [request]
    assert same[2].content == answer.content

    # The same API through another provider (Azure): the request is text, so is the answer
    # (an answer to a request the vendor never saw would be refused).
    azure = prepare({**RESPONSES, "provider": "azure-openai-responses"}, *history)
    assert texts(azure[1])[0].startswith("[approval asked for create_issue")
    assert texts(azure[2]) == ["[approved: mcpr_1]"]

    # An answer to no request in the history is text too.
    lone = prepare(
        RESPONSES, UserMessage(content="hi"), by(RESPONSES, TextContent(text="?")), answer
    )
    assert texts(lone[2]) == ["[approved: mcpr_1]"]


def test_vendor_blocks_of_another_api_become_text_in_any_message() -> None:
    mine = VendorContent(api="openai-responses", data={"type": "item_reference", "id": "x"})
    out = prepare(
        ANTHROPIC,
        UserMessage(content=[TextContent(text="look"), mine]),
        by(RESPONSES, mine),
        UserMessage(content="go on"),
    )
    assert texts(out[0])[1] == '[item_reference block: {"type": "item_reference", "id": "x"}]'
    assert texts(out[1]) == [mine.as_text()]
    kept = prepare(RESPONSES, UserMessage(content=[mine]))
    assert kept[0].content == [mine]


def test_a_built_in_call_to_another_api_is_a_plain_call_with_its_result() -> None:
    shell = ToolCall(
        id="call_1",
        name="local_shell",
        arguments={"command": ["ls"]},
        builtin="local_shell_call",
        raw={"type": "local_shell_call", "call_id": "call_1"},
    )
    program = ToolCall(id="toolu_2", name="get", caller={"type": "code_execution_20250825"})
    out = prepare(
        ANTHROPIC,
        UserMessage(content="list"),
        by(RESPONSES, shell, program),
        ToolResultMessage(tool_call_id="call_1", tool_name="local_shell", content=[]),
        ToolResultMessage(tool_call_id="toolu_2", tool_name="get", content=[]),
    )
    calls = out[1].content
    assert [(c.name, c.arguments) for c in calls] == [
        ("local_shell", {"command": ["ls"]}),
        ("get", {}),
    ]
    assert all(c.builtin is None and c.raw is None and c.caller is None for c in calls)
    assert [m.tool_call_id for m in out[2:]] == ["call_1", "toolu_2"]


def test_server_calls_need_no_result_message_and_are_never_dropped() -> None:
    history: list[Message] = [
        UserMessage(content="q"),
        by(ANTHROPIC, CALL, RESULT, ToolCall(id="toolu_1", name="f"), CITED),
        ToolResultMessage(tool_call_id="toolu_1", tool_name="f", content=[]),
        by(ANTHROPIC, ServerToolCall(id="srvtoolu_9", name="code_execution")),  # no result
        UserMessage(content="more"),
    ]
    report = audit_tool_pairs(history)
    assert not report.unpaired_calls and not report.orphan_results
    repaired = repair_tool_pairs(history).messages
    assert repaired == history
    out = prepare(ANTHROPIC, *history)
    assert len(out) == len(history)
    assert out[1].content[:2] == [CALL, RESULT]
    assert isinstance(out[3].content[0], ServerToolCall)


def _paused_history() -> list[Message]:
    big = "x" * 4_000
    return [
        UserMessage(content="old question " + big),
        by(ANTHROPIC, TextContent(text="old answer " + big)),
        UserMessage(content="search it"),
        by(ANTHROPIC, CALL),  # paused turn: the call
        by(ANTHROPIC, RESULT, TextContent(text="found " + big)),  # continued: its result
        UserMessage(content="thanks"),
    ]


def test_a_compaction_never_cuts_between_a_server_call_and_its_result() -> None:
    history = _paused_history()
    for keep in range(0, 6_000, 50):
        cut = compaction_cut(history, keep)
        assert cut != 4, f"keep_tokens={keep} cut the result from its call"
    # Where only the continued turn and the last question would fit, the call comes along.
    assert compaction_cut(history, 1_045) == 3
    compacted = compact(Context(messages=history), "summary", 1_045)
    assert compacted.messages[1:3] == history[3:5]


def test_a_compaction_may_cut_before_a_server_pair_in_one_message() -> None:
    history: list[Message] = [
        UserMessage(content="old " + "x" * 4_000),
        by(ANTHROPIC, TextContent(text="y" * 4_000)),
        UserMessage(content="search"),
        by(ANTHROPIC, CALL, RESULT, CITED),
        UserMessage(content="thanks"),
    ]
    assert compaction_cut(history, 200) == 2
