"""Cross-provider handoff: vendor artifacts, tool-call ids, pairing, surrogates."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from stream_core._history.handoff import (
    id_normalizer,
    is_same_model,
    prepare_messages,
    sanitize_surrogates,
)
from stream_core._tools import MISSING_RESULT_TEXT, audit_tool_pairs
from stream_core._types import (
    AssistantMessage,
    Context,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

TARGET: dict[str, Any] = {"api": "messages", "provider": "anthropic", "model_id": "claude-x"}


def same_model(*content: Any) -> AssistantMessage:
    return AssistantMessage(
        content=list(content), api="messages", provider="anthropic", model="claude-x"
    )


def other_model(*content: Any) -> AssistantMessage:
    return AssistantMessage(
        content=list(content), api="responses", provider="openai", model="gpt-y"
    )


def result(call_id: str, name: str = "read", text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)])


def prepare(*messages: Message, **kwargs: Any) -> list[Message]:
    return prepare_messages(Context(messages=list(messages)), **TARGET, **kwargs)


def only_assistant(messages: list[Message]) -> AssistantMessage:
    found = [m for m in messages if isinstance(m, AssistantMessage)]
    assert len(found) == 1
    return found[0]


# --- model identity ---------------------------------------------------------------------


def test_is_same_model_needs_provider_api_and_model() -> None:
    assert is_same_model(same_model(), **TARGET)
    for field, value in [("api", "chat"), ("provider", "bedrock"), ("model", "claude-z")]:
        message = same_model().model_copy(update={field: value})
        assert not is_same_model(message, **TARGET)


# --- assistant blocks -------------------------------------------------------------------


def test_cross_model_thinking_becomes_text() -> None:
    out = prepare(other_model(ThinkingContent(thinking="consider X", signature="sig")))

    assert only_assistant(out).content == [TextContent(text="consider X")]


def test_cross_model_blank_thinking_dropped() -> None:
    out = prepare(other_model(ThinkingContent(thinking="  \n"), TextContent(text="answer")))

    assert only_assistant(out).content == [TextContent(text="answer")]


def test_redacted_thinking_dropped_cross_model_kept_same_model() -> None:
    redacted = ThinkingContent(thinking="", signature="opaque", redacted=True)
    # Even redacted blocks carrying a summary text must not leak to another vendor.
    summarized = ThinkingContent(thinking="summary", signature="opaque2", redacted=True)

    cross = prepare(other_model(redacted, summarized, TextContent(text="a")))
    same = prepare(same_model(redacted, summarized, TextContent(text="a")))

    assert only_assistant(cross).content == [TextContent(text="a")]
    assert only_assistant(same).content == [redacted, summarized, TextContent(text="a")]


def test_same_model_thinking_kept_verbatim_with_signature() -> None:
    thinking = ThinkingContent(thinking="step 1", signature="EqQBCkgIARABGAIiQ")
    text = TextContent(text="done", text_signature="msg_123")

    out = only_assistant(prepare(same_model(thinking, text)))

    assert out.content == [thinking, text]
    assert out.content[0].model_dump() == thinking.model_dump()


def test_cross_model_text_signature_stripped() -> None:
    out = only_assistant(prepare(other_model(TextContent(text="hi", text_signature="msg_1"))))

    assert out.content == [TextContent(text="hi")]
    assert isinstance(out.content[0], TextContent)
    assert out.content[0].text_signature is None


def test_cross_model_thought_signature_removed_same_model_kept() -> None:
    call = ToolCall(id="c1", name="read", arguments={"p": 1}, thought_signature="ts")

    cross = only_assistant(prepare(other_model(call), result("c1")))
    same = only_assistant(prepare(same_model(call), result("c1")))

    cross_call = cross.tool_calls()[0]
    assert cross_call.thought_signature is None
    assert (cross_call.id, cross_call.name, cross_call.arguments) == ("c1", "read", {"p": 1})
    assert same.tool_calls()[0].thought_signature == "ts"


# --- tool-call ids ----------------------------------------------------------------------


def test_ids_normalized_and_results_follow() -> None:
    out = prepare(
        UserMessage(content="go"),
        same_model(ToolCall(id="call|abc/def", name="read")),
        result("call|abc/def"),
        normalize_id=id_normalizer(),
    )

    assistant = only_assistant(out)
    assert assistant.tool_calls()[0].id == "call_abc_def"
    answer = out[2]
    assert isinstance(answer, ToolResultMessage)
    assert answer.tool_call_id == "call_abc_def"
    assert result_text(answer) == "ok"


def test_id_normalizer_truncates() -> None:
    normalize = id_normalizer(max_length=8)
    assert normalize("toolu_0123456789") == "toolu_01"
    assert id_normalizer(allowed="a-z")("ab.CD") == "ab___"


def test_colliding_ids_made_unique_and_results_follow_their_call() -> None:
    out = prepare(
        other_model(
            ToolCall(id="a|b", name="first"),
            ToolCall(id="a/b", name="second"),
            ToolCall(id="a_b", name="third"),
        ),
        result("a_b", "third", "3"),
        result("a|b", "first", "1"),
        result("a/b", "second", "2"),
        normalize_id=id_normalizer(),
    )

    calls = only_assistant(out).tool_calls()
    ids = [c.id for c in calls]
    assert len(set(ids)) == 3
    assert ids[0] == "a_b"
    by_id = {m.tool_call_id: m for m in out if isinstance(m, ToolResultMessage)}
    for c in calls:
        # Each result still answers the call it answered before the rewrite.
        assert by_id[c.id].tool_name == c.name
    assert audit_tool_pairs(out).ok


def test_collision_suffix_stays_within_max_length() -> None:
    normalize = id_normalizer(max_length=6)
    out = prepare(
        other_model(ToolCall(id="abcdef|1", name="x"), ToolCall(id="abcdef|2", name="y")),
        result("abcdef|1", "x"),
        result("abcdef|2", "y"),
        normalize_id=normalize,
    )

    ids = [c.id for c in only_assistant(out).tool_calls()]
    assert ids == ["abcdef", "abcd_2"]
    assert [m.tool_call_id for m in out if isinstance(m, ToolResultMessage)] == ids


def test_orphan_result_does_not_pair_with_a_rewritten_id() -> None:
    # "x_y" answers no call; after "x|y" becomes "x_y" it must not pose as its answer.
    out = prepare(
        other_model(ToolCall(id="x|y", name="read")),
        result("x_y", "read", "stray"),
        normalize_id=id_normalizer(),
    )

    results = [m for m in out if isinstance(m, ToolResultMessage)]
    assert len(results) == 1
    assert results[0].is_error and result_text(results[0]) == MISSING_RESULT_TEXT


# --- pairing and immutability -----------------------------------------------------------


def test_unpaired_call_gets_synthetic_result() -> None:
    out = prepare(
        UserMessage(content="go"),
        other_model(ToolCall(id="c1", name="read"), ToolCall(id="c2", name="grep")),
        result("c1"),
        UserMessage(content="next"),
    )

    assert [m.role for m in out] == ["user", "assistant", "tool_result", "tool_result", "user"]
    synthetic = out[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.is_error) == ("c2", "grep", True)


def test_caller_context_not_mutated() -> None:
    context = Context(
        messages=[
            UserMessage(content="go"),
            other_model(
                ThinkingContent(thinking="hmm", signature="s"),
                TextContent(text="t", text_signature="ts"),
                ToolCall(id="c|1", name="read", thought_signature="sig"),
                ToolCall(id="c|2", name="read"),
            ),
            result("c|1"),
            result("ghost"),
        ]
    )
    before = context.model_dump()
    messages_list = context.messages
    originals = list(context.messages)

    out = prepare_messages(context, **TARGET, normalize_id=id_normalizer())

    assert out is not context.messages
    assert context.messages is messages_list and context.messages == originals
    assert context.model_dump() == before
    assert only_assistant(out) is not originals[1]


def test_unchanged_history_passes_through() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        same_model(ThinkingContent(thinking="t", signature="s"), ToolCall(id="c1", name="r")),
        result("c1", "r"),
    ]

    out = prepare(*history, normalize_id=id_normalizer())

    assert out == history


# --- surrogates -------------------------------------------------------------------------


def test_lone_surrogates_removed() -> None:
    assert sanitize_surrogates("a\ud83db") == "ab"
    assert sanitize_surrogates("a\ude00b") == "ab"
    assert sanitize_surrogates("\udc00\ud800") == ""


def test_emoji_kept_and_split_pair_rejoined() -> None:
    assert sanitize_surrogates("ok \U0001f600") == "ok \U0001f600"
    # Halves of a pair, as some decoders leave them, become the character again.
    assert sanitize_surrogates("x\ud83d\ude00\ud83d") == "x\U0001f600"
    assert sanitize_surrogates("x\ud83d\ude00").encode("utf-8") == "x\U0001f600".encode()


# Surrogates are drawn on their own as well, so lone halves and adjacent pairs both show up.
_ANY_CHAR = st.one_of(st.characters(exclude_categories=()), st.characters(categories=["Cs"]))


@given(st.text(alphabet=_ANY_CHAR))
def test_sanitized_text_has_no_surrogates(text: str) -> None:
    cleaned = sanitize_surrogates(text)

    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in cleaned)
    cleaned.encode("utf-8")  # would raise on any surrogate left
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        assert cleaned == text


def result_text(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))
