"""`compaction_cut` pairs every form of a tool result and stays linear (issue point: a
registered role whose `to_messages()` is a `ToolResultMessage` was kept while its call was
summarized away, and a history with a call at the start and its result at the end took
quadratic time: 10k messages 3-5 s, 50k past 75 s)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, overload

from stream_core import (
    AssistantMessage,
    Context,
    CustomMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    audit_tool_pairs,
    compact,
    compaction_cut,
    model_messages,
    register_message_role,
)


@register_message_role
class PluginResult(CustomMessage):
    """A harness's record of a tool result, sent as the built-in result."""

    role: Literal["test_plugin_result"] = "test_plugin_result"
    call_id: str
    text: str

    def to_messages(self) -> list[ToolResultMessage]:
        return [ToolResultMessage(tool_call_id=self.call_id, tool_name="look", content=self.text)]


@register_message_role
class PluginCall(CustomMessage):
    """A harness's record of a model's call, sent as the built-in assistant message."""

    role: Literal["test_plugin_call"] = "test_plugin_call"
    call_id: str

    def to_messages(self) -> list[AssistantMessage]:
        return [_assistant(self.call_id)]


def _assistant(*calls: str, text: str = "") -> AssistantMessage:
    content: list[Any] = [TextContent(text=text)] if text else []
    content += [ToolCall(id=c, name="look", arguments={"q": c}) for c in calls]
    return AssistantMessage(
        api="faux", provider="faux", model="m", content=content,
        stop_reason="tool_use" if calls else "stop", usage=Usage(input=1, output=1),
    )  # fmt: skip


def _result(call_id: str, size: int = 40) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="look", content="x" * size)


def _kept_pairs_ok(messages: list[Message], cut: int) -> bool:
    return audit_tool_pairs(model_messages(messages[cut:])).ok


def test_a_registered_result_is_kept_only_with_its_call() -> None:
    history: list[Message] = [
        UserMessage(content="first " * 200),
        _assistant("c1"),
        PluginResult(call_id="c1", text="done"),
        UserMessage(content="next"),
        _assistant(text="ok"),
    ]
    for keep in range(0, 2000, 5):
        cut = compaction_cut(history, keep)
        assert _kept_pairs_ok(history, cut), (keep, cut)
    # The result and what follows fit 15 tokens, its call does not: before, the cut was 2
    # (the result kept, its call summarized away).
    assert compaction_cut(history, 15) == 1


def test_a_registered_call_is_kept_with_its_result() -> None:
    history: list[Message] = [
        UserMessage(content="first " * 200),
        PluginCall(call_id="c2"),
        _result("c2"),
        UserMessage(content="next"),
    ]
    for keep in range(0, 2000, 5):
        cut = compaction_cut(history, keep)
        assert _kept_pairs_ok(history, cut), (keep, cut)
    context = compact(Context(messages=history), "summary", 40)
    assert audit_tool_pairs(model_messages(context.messages)).ok


class Counted(Sequence[Message]):
    """A history that counts every message read from it (slices count each item)."""

    def __init__(self, items: list[Message]) -> None:
        self.items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            part = self.items[index]
            self.reads += len(part)
            return part
        self.reads += 1
        return self.items[index]

    def __iter__(self) -> Iterator[Message]:
        for m in self.items:
            self.reads += 1
            yield m


def _long_call(n: int) -> list[Message]:
    """A call at the start, its result at the end, `n` small turns between."""
    middle: list[Message] = []
    for i in range(n // 2):
        middle += [UserMessage(content=f"q{i}"), _assistant(text=f"a{i}")]
    return [
        UserMessage(content="go"),
        _assistant("long"),
        *middle,
        _result("long"),
        UserMessage(content="last"),
    ]


def test_a_call_at_the_start_and_its_result_at_the_end_is_linear() -> None:
    for n in (2_000, 8_000):
        history = Counted(_long_call(n))
        cut = compaction_cut(history, 50)
        assert cut <= 1  # the call and its result stay together
        # Before: every step back rescanned the history (about n*n/2 reads: 2M at 2k).
        assert history.reads <= 20 * len(history), (n, history.reads)
