"""The assembler on its own: block keys, stop reasons, truncation, usage, cost, finalize.

Providers only say "this fragment belongs to vendor key K"; the assembler decides content
indices, emits start/delta/end, and settles the final message. These tests drive it the
way a provider would and check what a consumer of the events relies on.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

import pytest

import stream_core._pipeline.assembler as assembler_module
from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    MessageUpdate,
    Model,
    ModelPrices,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    fail_truncated_tool_calls,
)
from stream_core.provider import Assembler, StopRule, compute_cost

STOPS: Mapping[str, StopRule] = {
    "end_turn": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
    "refusal": "refusal",
    "content_filter": "content_filter",
}
PRICED = Model(
    id="m",
    api="test-api",
    provider="test",
    base_url="https://test.invalid",
    prices=ModelPrices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
)
UNPRICED = PRICED.model_copy(update={"prices": ModelPrices()})


def make(model: Model = PRICED) -> tuple[Assembler, AssistantMessage, deque[AssistantStreamEvent]]:
    message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    out: deque[AssistantStreamEvent] = deque()
    return Assembler(message, model, STOPS, out), message, out


def deltas(out: deque[AssistantStreamEvent]) -> list[tuple[str, int, str | None]]:
    """(delta type, content_index, fragment) for every update so far."""
    got: list[tuple[str, int, str | None]] = []
    for event in out:
        assert isinstance(event, MessageUpdate)
        d = event.delta
        got.append((d.type, d.content_index, getattr(d, "delta", None)))
    return got


def ends_per_block(out: deque[AssistantStreamEvent]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for kind, index, _ in deltas(out):
        if kind.endswith("_end"):
            counts[index] = counts.get(index, 0) + 1
    return counts


def starts(out: deque[AssistantStreamEvent]) -> list[int]:
    return [index for kind, index, _ in deltas(out) if kind.endswith("_start")]


# --- block keys ---------------------------------------------------------------------------


def test_interleaved_tool_calls_under_two_keys_never_merge() -> None:
    asm, message, out = make()

    asm.tool_call(0, "", id="call_a", name="read")
    asm.tool_call(1, "", id="call_b", name="write")
    asm.tool_call(0, '{"path": ')
    asm.tool_call(1, '{"text": "hi", ')
    asm.tool_call(0, '"a.txt"}')
    asm.tool_call(1, '"mode": "w"}')
    asm.end(1)
    asm.end(0)
    asm.set_stop_reason("tool_use")
    asm.finalize()

    calls = message.tool_calls()
    assert [(c.id, c.name) for c in calls] == [("call_a", "read"), ("call_b", "write")]
    assert calls[0].arguments == {"path": "a.txt"}
    assert calls[1].arguments == {"text": "hi", "mode": "w"}
    assert not any(c.truncated for c in calls)
    # Indices follow start order; each block's fragments concatenate to its own text.
    assert starts(out) == [0, 1]
    streamed = {
        index: "".join(f or "" for k, i, f in deltas(out) if k == "toolcall_delta" and i == index)
        for index in (0, 1)
    }
    assert streamed == {0: '{"path": "a.txt"}', 1: '{"text": "hi", "mode": "w"}'}
    assert ends_per_block(out) == {0: 1, 1: 1}
    assert message.stop_reason == "tool_use"


def test_a_key_seen_again_after_its_end_starts_a_new_block() -> None:
    asm, message, out = make()

    asm.text("t", "first")
    asm.end("t")
    asm.text("t", "second")
    asm.finalize()

    assert [b.text for b in message.content if isinstance(b, TextContent)] == ["first", "second"]
    assert starts(out) == [0, 1]
    assert ends_per_block(out) == {0: 1, 1: 1}


def test_a_new_id_under_an_open_key_starts_a_new_call() -> None:
    # Some servers send every parallel call under index 0, told apart only by id.
    asm, message, out = make()

    asm.tool_call(0, '{"q": 1}', id="call_1", name="search")
    asm.tool_call(0, '{"q": 2}', id="call_2", name="search")
    asm.tool_call(0, "")  # no id: continues the open call
    asm.finalize()

    calls = message.tool_calls()
    assert [(c.id, c.arguments) for c in calls] == [("call_1", {"q": 1}), ("call_2", {"q": 2})]
    kinds = [(k, i) for k, i, _ in deltas(out)]
    # The first call ends before the second starts.
    assert kinds.index(("toolcall_end", 0)) < kinds.index(("toolcall_start", 1))
    assert ends_per_block(out) == {0: 1, 1: 1}


def test_the_same_id_repeated_under_its_key_continues_the_call() -> None:
    asm, message, _ = make()

    asm.tool_call(0, '{"q":', id="call_1", name="search")
    asm.tool_call(0, " 1}", id="call_1", name="search")
    asm.finalize()

    assert [(c.id, c.arguments) for c in message.tool_calls()] == [("call_1", {"q": 1})]


def test_text_thinking_and_calls_get_indices_in_start_order() -> None:
    asm, message, out = make()

    asm.thinking("think", "hmm")
    asm.text("text", "answer")
    asm.tool_call("tool", "{}", id="c", name="f")
    asm.finalize()

    assert [type(b) for b in message.content] == [ThinkingContent, TextContent, ToolCall]
    assert [k for k, _, _ in deltas(out) if k.endswith("_start")] == [
        "thinking_start",
        "text_start",
        "toolcall_start",
    ]
    assert starts(out) == [0, 1, 2]


def test_thinking_signature_accumulates_without_events() -> None:
    asm, message, out = make()

    asm.start_thinking(0)
    asm.thinking(0, "reason")
    before = len(out)
    asm.thinking_signature(0, "sig-part-1:")
    asm.thinking_signature(0, "sig-part-2")
    assert len(out) == before
    asm.end(0)

    block = message.content[0]
    assert isinstance(block, ThinkingContent)
    assert (block.thinking, block.signature) == ("reason", "sig-part-1:sig-part-2")


# --- stop reasons and truncation ----------------------------------------------------------


def complete_call(asm: Assembler, key: Any = 0, args: str = '{"path": "a"}') -> None:
    asm.tool_call(key, args, id=f"call_{key}", name="read")
    asm.end(key)


def test_length_marks_every_call_truncated_and_stays_length() -> None:
    asm, message, _ = make()
    complete_call(asm, 0)
    complete_call(asm, 1)
    asm.tool_call(2, '{"path": "b', id="call_2", name="read")  # cut mid-call

    asm.set_stop_reason("max_tokens")
    asm.finalize()

    assert message.stop_reason == "length"
    assert message.raw_stop_reason == "max_tokens"
    assert [c.truncated for c in message.tool_calls()] == [True, True, True]
    results = fail_truncated_tool_calls(message)
    assert [r.tool_call_id for r in results] == ["call_0", "call_1", "call_2"]


def test_complete_call_with_vendor_stop_becomes_tool_use() -> None:
    asm, message, _ = make()
    complete_call(asm)

    asm.set_stop_reason("end_turn")
    asm.finalize()

    assert message.stop_reason == "tool_use"
    assert message.raw_stop_reason == "end_turn"
    assert message.tool_calls()[0].arguments == {"path": "a"}


def test_vendor_tool_use_without_any_call_is_a_plain_stop() -> None:
    asm, message, _ = make()
    asm.text(0, "nothing to run")

    asm.set_stop_reason("tool_use")
    asm.finalize()

    assert message.stop_reason == "stop"


@pytest.mark.parametrize("raw", ["end_turn", "tool_use", "something_new"])
def test_invalid_final_arguments_are_truncated_on_any_stop(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assembler_module, "_warned_unknown", set())
    asm, message, _ = make()
    complete_call(asm, 0, '{"path": "a", oops}')

    asm.set_stop_reason(raw)
    asm.finalize()

    call = message.tool_calls()[0]
    assert call.truncated
    assert message.error is None
    assert [r.tool_call_id for r in fail_truncated_tool_calls(message)] == ["call_0"]


def test_the_same_object_sent_twice_is_accepted() -> None:
    # A proxy that re-sends the whole arguments after streaming them.
    asm, message, _ = make()
    complete_call(asm, 0, '{"path": "a", "n": [1, 2]} {"path": "a", "n": [1, 2]}')
    asm.set_stop_reason("tool_use")
    asm.finalize()

    call = message.tool_calls()[0]
    assert call.arguments == {"path": "a", "n": [1, 2]}
    assert not call.truncated
    assert message.stop_reason == "tool_use"


def test_two_different_objects_are_never_merged() -> None:
    asm, message, _ = make()
    complete_call(asm, 0, '{"path": "a"}{"path": "b"}')
    asm.set_stop_reason("tool_use")
    asm.finalize()

    assert message.tool_calls()[0].truncated


@pytest.mark.parametrize("args", ["[1, 2]", '"text"', "42"])
def test_arguments_that_are_not_an_object_are_truncated(args: str) -> None:
    asm, message, _ = make()
    complete_call(asm, 0, args)
    asm.finalize()

    assert message.tool_calls()[0].truncated


@pytest.mark.parametrize("args", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}'])
def test_non_json_number_tokens_make_the_call_truncated(args: str) -> None:
    asm, message, _ = make()
    complete_call(asm, 0, args)
    asm.set_stop_reason("tool_use")
    asm.finalize()

    assert message.tool_calls()[0].truncated


def test_empty_arguments_mean_a_call_without_arguments() -> None:
    asm, message, _ = make()
    asm.start_tool_call(0, id="call_0", name="now")
    asm.end(0)
    asm.set_stop_reason("tool_use")
    asm.finalize()

    call = message.tool_calls()[0]
    assert (call.arguments, call.truncated) == ({}, False)


def test_unknown_stop_value_is_stop_kept_raw_and_warned_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assembler_module, "_warned_unknown", set())
    caplog.set_level(logging.WARNING, logger="stream_core")

    for _ in range(2):
        asm, message, _ = make()
        asm.text(0, "done")
        asm.set_stop_reason("brand_new_reason")
        asm.finalize()
        assert message.stop_reason == "stop"
        assert message.raw_stop_reason == "brand_new_reason"
        assert message.error is None

    warnings = [r for r in caplog.records if "brand_new_reason" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING


def test_unknown_stop_value_with_a_complete_call_is_tool_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(assembler_module, "_warned_unknown", set())
    asm, message, _ = make()
    complete_call(asm)
    asm.set_stop_reason("FUNCTION_CALL_DONE")
    asm.finalize()

    assert message.stop_reason == "tool_use"
    assert message.raw_stop_reason == "FUNCTION_CALL_DONE"


@pytest.mark.parametrize("raw", ["refusal", "content_filter"])
def test_refusal_and_content_filter_end_as_error_keeping_content(raw: str) -> None:
    asm, message, _ = make()
    asm.text(0, "I started to answer")
    asm.set_usage(input=10, output=4)

    asm.set_stop_reason(raw, detail="policy X")
    asm.finalize()

    assert message.stop_reason == "error"
    assert message.raw_stop_reason == raw
    assert message.error is not None
    assert message.error.kind == raw
    assert raw in message.error.message and "policy X" in message.error.message
    assert message.text() == "I started to answer"
    assert (message.usage.input, message.usage.output) == (10, 4)


def test_a_rule_from_elsewhere_overrides_the_table_but_keeps_the_raw_value() -> None:
    # e.g. an OpenAI-compatible refusal field next to finish_reason "stop".
    asm, message, _ = make()
    asm.set_stop_reason("end_turn", rule="refusal")
    asm.finalize()

    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "refusal"
    assert message.raw_stop_reason == "end_turn"


# --- usage and cost -----------------------------------------------------------------------


def test_usage_snapshots_keep_earlier_values_when_later_ones_are_missing() -> None:
    asm, message, _ = make()

    asm.set_usage(input=100, output=1, cache_read=50, cache_write=20)
    asm.set_usage(output=30, input=None, cache_read=None)  # a later event omits fields
    asm.set_usage(output=42)
    asm.finalize()

    u = message.usage
    assert (u.input, u.output, u.cache_read, u.cache_write) == (100, 42, 50, 20)
    assert u.total_tokens == 100 + 42 + 50 + 20


def test_usage_deltas_add_up() -> None:
    asm, message, _ = make()

    asm.add_usage(input=10, output=2)
    asm.add_usage(output=3, cache_read=5, reasoning=1)
    asm.finalize()

    u = message.usage
    assert (u.input, u.output, u.cache_read, u.reasoning) == (10, 5, 5, 1)
    assert u.total_tokens == 20


def test_total_tokens_is_always_the_sum_even_mid_stream() -> None:
    asm, message, _ = make()

    asm.set_usage(input=7)
    assert message.usage.total_tokens == 7
    asm.set_usage(output=3, cache_write=11)
    assert message.usage.total_tokens == 21
    asm.add_usage(cache_read=9)
    assert message.usage.total_tokens == 30


def test_reasoning_is_clamped_to_output() -> None:
    asm, message, _ = make()

    asm.set_usage(input=5, output=10, reasoning=25)
    asm.finalize()

    assert message.usage.reasoning == 10
    assert message.usage.output == 10
    assert message.usage.total_tokens == 15  # reasoning is never added again


def test_cost_comes_from_the_model_prices() -> None:
    asm, message, _ = make(PRICED)

    asm.set_usage(input=1_000, output=2_000, cache_read=10_000, cache_write=4_000)
    asm.finalize()

    cost = message.usage.cost
    assert cost is not None
    assert cost.input == pytest.approx(0.003)
    assert cost.output == pytest.approx(0.030)
    assert cost.cache_read == pytest.approx(0.003)
    assert cost.cache_write == pytest.approx(0.015)
    assert cost.total == pytest.approx(0.051)


def test_cost_is_none_when_prices_are_unknown() -> None:
    asm, message, _ = make(UNPRICED)
    asm.set_usage(input=100, output=100)
    asm.finalize()

    assert message.usage.cost is None


def test_cost_is_none_when_a_needed_price_is_unknown() -> None:
    no_cache_price = PRICED.model_copy(
        update={"prices": ModelPrices(input=1.0, output=2.0, cache_read=None, cache_write=None)}
    )

    assert compute_cost(no_cache_price, Usage(input=10, output=10, cache_read=5)) is None
    # A price for tokens that were not used is not needed.
    cost = compute_cost(no_cache_price, Usage(input=1_000_000, output=1_000_000))
    assert cost is not None
    assert (cost.input, cost.output, cost.cache_read, cost.total) == (1.0, 2.0, 0.0, 3.0)


# --- finalize on error ----------------------------------------------------------------------


def test_finalize_with_an_error_ends_open_blocks_and_keeps_what_arrived() -> None:
    asm, message, out = make()
    asm.thinking("think", "considering")
    asm.end("think")
    asm.text("text", "partial ans")
    complete_call(asm, "done", '{"path": "x"}')
    asm.tool_call("open", '{"path": "y', id="call_open", name="read")
    asm.set_usage(input=50, output=20)

    asm.finalize(StreamError(kind="network", message="connection reset", retryable=True))

    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "network"
    # Every started block got exactly one end.
    assert ends_per_block(out) == {index: 1 for index in starts(out)}
    assert len(starts(out)) == 4
    assert message.text() == "partial ans"
    calls = message.tool_calls()
    assert [(c.id, c.truncated) for c in calls] == [("call_done", False), ("call_open", True)]
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (50, 20, 70)
    assert [r.tool_call_id for r in fail_truncated_tool_calls(message)] == ["call_open"]


def test_finalize_with_an_abort_is_aborted() -> None:
    asm, message, out = make()
    asm.text(0, "so far")

    asm.finalize(StreamError(kind="aborted", message="closed by the caller"))

    assert message.stop_reason == "aborted"
    assert message.error is not None and message.error.kind == "aborted"
    assert message.text() == "so far"
    assert ends_per_block(out) == {0: 1}


def test_ending_an_unknown_key_does_nothing() -> None:
    asm, message, out = make()

    asm.end("never-started")
    asm.text(0, "")  # empty deltas start nothing
    asm.finalize()

    assert message.content == []
    assert list(out) == []


# --- live message, O(delta) events ------------------------------------------------------------


def test_live_text_is_visible_mid_stream_and_events_carry_only_the_delta() -> None:
    asm, message, out = make()
    pieces = ["Hel", "lo, ", "wor", "ld", "!"]
    seen: list[str] = []  # the consumer keeps the string it read after each delta

    for piece in pieces:
        asm.text(0, piece)
        block = message.content[0]
        assert isinstance(block, TextContent)
        seen.append(block.text)

    # Read live after each delta, and the strings kept were not changed by later appends.
    assert seen == ["Hel", "Hello, ", "Hello, wor", "Hello, world", "Hello, world!"]
    events = [e for e in out if isinstance(e, MessageUpdate) and e.delta.type == "text_delta"]
    assert [getattr(e.delta, "delta", None) for e in events] == pieces
    # Every event shares the one live message: nothing is copied per delta.
    assert all(e.message is message for e in out)
    assert message.content[0].model_dump() == {
        "type": "text",
        "text": "Hello, world!",
        "text_signature": None,
    }


def test_live_thinking_and_partial_arguments_mid_stream() -> None:
    asm, message, _ = make()

    asm.thinking(0, "step one")
    old = message.content[0]
    assert isinstance(old, ThinkingContent)
    old_text = old.thinking
    asm.thinking(0, ", step two")
    assert old.thinking == "step one, step two"
    assert old_text == "step one"

    asm.tool_call(1, '{"path": "src/ma', id="c", name="read")
    call = message.content[1]
    assert isinstance(call, ToolCall)
    assert call.partial_arguments() == {"path": "src/ma"}
    asm.tool_call(1, 'in.py"}')
    asm.end(1)
    assert call.arguments == {"path": "src/main.py"}
    assert "partial_json" not in call.model_dump()
