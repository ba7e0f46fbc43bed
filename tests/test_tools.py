"""Untrusted tool calls get error results; call/result pairing is audited and repaired."""

from __future__ import annotations

from typing import Any

from stream_core._tools import (
    MISSING_RESULT_TEXT,
    audit_tool_pairs,
    fail_truncated_tool_calls,
    repair_tool_pairs,
)
from stream_core._types import (
    AssistantMessage,
    Message,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def assistant(*calls: ToolCall, stop_reason: StopReason = "tool_use") -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text="working"), *calls],
        api="test-api",
        provider="test",
        model="m1",
        stop_reason=stop_reason,
    )


def call(call_id: str, name: str = "read", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result(call_id: str, name: str = "read", text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)])


def result_text(message: Message) -> str:
    assert isinstance(message, ToolResultMessage)
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


# --- fail_truncated_tool_calls ----------------------------------------------------------


def test_length_stop_fails_every_call_in_order() -> None:
    message = assistant(
        call("c1", "read", path="a"), call("c2", "write", path="b"), stop_reason="length"
    )

    results = fail_truncated_tool_calls(message)

    assert [(r.tool_call_id, r.tool_name) for r in results] == [("c1", "read"), ("c2", "write")]
    assert all(r.is_error for r in results)
    text = result_text(results[1])
    assert "`write`" in text
    assert "NOT executed" in text
    assert "Re-issue" in text


def test_other_stop_fails_only_the_truncated_call() -> None:
    broken = ToolCall(id="c2", name="write", truncated=True)
    message = assistant(call("c1"), broken, stop_reason="tool_use")

    results = fail_truncated_tool_calls(message)

    assert [(r.tool_call_id, r.tool_name, r.is_error) for r in results] == [("c2", "write", True)]


def test_nothing_untrusted_gives_no_results() -> None:
    assert fail_truncated_tool_calls(assistant(call("c1"), call("c2"))) == []
    # A length stop with no calls at all has nothing to answer either.
    assert fail_truncated_tool_calls(assistant(stop_reason="length")) == []


# --- audit_tool_pairs -------------------------------------------------------------------


def test_clean_history_is_ok() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        assistant(call("c1"), call("c2")),
        result("c1"),
        result("c2"),
        UserMessage(content="again"),
        assistant(call("c1")),  # a reused id pairs with the most recent call
        result("c1"),
    ]

    audit = audit_tool_pairs(history)

    assert audit.ok
    assert audit.unpaired_calls == [] and audit.orphan_results == []


def test_unpaired_call_is_reported_with_its_message_index() -> None:
    c2 = call("c2")
    history: list[Message] = [UserMessage(content="go"), assistant(call("c1"), c2), result("c1")]

    audit = audit_tool_pairs(history)

    assert not audit.ok
    assert audit.unpaired_calls == [(1, c2)]


def test_result_without_call_is_orphan() -> None:
    stray = result("nope")
    history: list[Message] = [assistant(call("c1")), result("c1"), stray]

    audit = audit_tool_pairs(history)

    assert audit.orphan_results == [(2, stray)]
    assert audit.unpaired_calls == []


def test_result_before_its_call_is_orphan_and_call_unpaired() -> None:
    early = result("c1")
    c1 = call("c1")
    audit = audit_tool_pairs([early, assistant(c1)])

    assert audit.orphan_results == [(0, early)]
    assert audit.unpaired_calls == [(1, c1)]


def test_duplicate_result_is_orphan() -> None:
    second = result("c1", text="again")
    history: list[Message] = [assistant(call("c1")), result("c1"), second]

    audit = audit_tool_pairs(history)

    assert audit.orphan_results == [(2, second)]
    assert audit.unpaired_calls == []


def test_name_mismatch_is_reported_but_paired() -> None:
    c1 = call("c1", "read")
    wrong = result("c1", "write")

    audit = audit_tool_pairs([assistant(c1), wrong])

    assert audit.name_mismatches == [(1, wrong, c1)]
    assert audit.unpaired_calls == [] and audit.orphan_results == []
    assert not audit.ok


def test_calls_of_an_aborted_message_count() -> None:
    c1 = call("c1")
    audit = audit_tool_pairs([assistant(c1, stop_reason="aborted")])
    assert audit.unpaired_calls == [(0, c1)]


# --- repair_tool_pairs ------------------------------------------------------------------


def test_missing_result_goes_after_existing_results_before_next_user() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        assistant(call("c1", "read"), call("c2", "grep"), call("c3", "ls")),
        result("c1", "read"),
        UserMessage(content="next"),
    ]

    repaired = repair_tool_pairs(history)

    roles = [(m.role, getattr(m, "tool_call_id", None)) for m in repaired.messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool_result", "c1"),
        ("tool_result", "c2"),
        ("tool_result", "c3"),
        ("user", None),
    ]
    synthetic = repaired.messages[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.is_error and synthetic.tool_name == "grep"
    assert result_text(synthetic) == MISSING_RESULT_TEXT
    assert [c.id for _, c in repaired.report.unpaired_calls] == ["c2", "c3"]
    assert audit_tool_pairs(repaired.messages).ok


def test_missing_result_at_end_of_history() -> None:
    history: list[Message] = [UserMessage(content="go"), assistant(call("c1"), stop_reason="error")]

    repaired = repair_tool_pairs(history)

    assert len(repaired.messages) == 3
    last = repaired.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert (last.tool_call_id, last.is_error) == ("c1", True)
    assert audit_tool_pairs(repaired.messages).ok


def test_missing_result_before_next_assistant_message() -> None:
    history: list[Message] = [assistant(call("c1")), assistant(call("c2")), result("c2")]

    repaired = repair_tool_pairs(history)

    ids = [getattr(m, "tool_call_id", m.role) for m in repaired.messages]
    assert ids == ["assistant", "c1", "assistant", "c2"]


def test_orphan_dropped_and_reported() -> None:
    stray = result("ghost")
    history: list[Message] = [assistant(call("c1")), result("c1"), stray, UserMessage(content="x")]

    repaired = repair_tool_pairs(history)

    assert stray not in repaired.messages
    assert len(repaired.messages) == 3
    assert repaired.report.orphan_results == [(2, stray)]


def test_name_mismatch_is_kept() -> None:
    history: list[Message] = [assistant(call("c1", "read")), result("c1", "write")]

    repaired = repair_tool_pairs(history)

    assert repaired.messages == history
    assert len(repaired.report.name_mismatches) == 1


def test_repair_does_not_mutate_input() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        assistant(call("c1"), call("c2")),
        result("c1"),
        result("ghost"),
        UserMessage(content="next"),
    ]
    before = [m.model_dump() for m in history]
    original_list = list(history)

    repaired = repair_tool_pairs(history)

    assert repaired.messages is not history
    assert history == original_list
    assert [m.model_dump() for m in history] == before
