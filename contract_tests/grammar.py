"""`assert_valid_event_stream(events)`: the event grammar of CONTRACT 2, checked alone.

Every message names the event position and the rule broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_core import (
    BLOCK_KINDS,
    AssistantStreamEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
)

_KIND = {
    "text_start": ("text", "start"),
    "text_delta": ("text", "delta"),
    "text_end": ("text", "end"),
    "thinking_start": ("thinking", "start"),
    "thinking_delta": ("thinking", "delta"),
    "thinking_end": ("thinking", "end"),
    "toolcall_start": ("toolcall", "start"),
    "toolcall_delta": ("toolcall", "delta"),
    "toolcall_end": ("toolcall", "end"),
    "block_start": ("block", "start"),
    "block_delta": ("block", "delta"),
    "block_end": ("block", "end"),
}
_BLOCK_TYPE = {"text": TextContent, "thinking": ThinkingContent, "toolcall": ToolCall}


def assert_valid_event_stream(events: Sequence[AssistantStreamEvent]) -> None:
    assert events, "rule: a stream has events (got none)"
    assert isinstance(events[0], MessageStart), (
        f"event 0: first event must be message_start, got {events[0].type}"
    )
    assert isinstance(events[-1], MessageEnd), (
        f"event {len(events) - 1}: last event must be message_end, got {events[-1].type}"
    )
    message = events[-1].message
    state: dict[int, str] = {}  # content_index -> "open" | "ended"
    kinds: dict[int, str] = {}
    texts: dict[int, list[str]] = {}
    started: dict[int, int] = {}  # content_index -> position of its start event
    block_types: dict[int, str] = {}  # content_index -> the `type` a block_start named
    next_index = 0
    for i, ev in enumerate(events):
        if i and isinstance(ev, MessageStart):
            raise AssertionError(f"event {i}: message_start must come exactly once, first")
        if i < len(events) - 1 and isinstance(ev, MessageEnd):
            raise AssertionError(f"event {i}: message_end must come exactly once, last")
        assert ev.message is message, f"event {i}: event.message must be the one live message"
        if not isinstance(ev, MessageUpdate):
            continue
        d = ev.delta
        idx = d.content_index
        if d.type == "citation":
            # A citation goes to a text block that has started (open, or done: some
            # vendors cite once the text is complete), and is already in its citations.
            assert kinds.get(idx) == "text", (
                f"event {i}: citation for content_index {idx}, which is no started text block"
            )
            cited = message.content[idx].citations or []  # type: ignore[union-attr]
            assert any(c is d.citation for c in cited), (
                f"event {i}: the citation is not in block {idx}'s citations"
            )
            continue
        kind, phase = _KIND[d.type]
        if phase == "start":
            assert idx == next_index, (
                f"event {i}: {d.type} content_index {idx}, expected {next_index} (blocks are "
                "numbered in start order)"
            )
            next_index += 1
            state[idx], kinds[idx], texts[idx] = "open", kind, []
            started[idx] = i
            if kind == "block":
                block_types[idx] = d.kind  # type: ignore[union-attr]
            continue
        assert idx in state, f"event {i}: {d.type} for content_index {idx} that never started"
        assert kinds[idx] == kind, f"event {i}: {d.type} on a {kinds[idx]} block {idx}"
        assert state[idx] == "open", f"event {i}: {d.type} after {kind}_end of block {idx}"
        if phase == "delta":
            texts[idx].append(d.delta)  # type: ignore[union-attr]
        else:
            state[idx] = "ended"
    still_open = [i for i, s in state.items() if s == "open"]
    assert not still_open, (
        "rule: every started block ends before message_end; open: "
        f"{still_open} ("
        + ", ".join(f"block {i} {kinds[i]}_start at event {started[i]}" for i in still_open)
        + f", message_end at event {len(events) - 1})"
    )
    assert len(message.content) == next_index, (
        f"rule: message.content has {len(message.content)} blocks, {next_index} were started"
    )
    for idx, block in enumerate(message.content):
        if kinds[idx] == "block":
            row = BLOCK_KINDS.get(block_types[idx])
            assert row is not None and row.family == "block", (
                f"block {idx}: block_start names {block_types[idx]!r}, no block_* kind"
            )
            assert type(block) is row.cls, (
                f"block {idx}: {type(block).__name__} started as {block_types[idx]}"
            )
            joined = "".join(texts[idx])
            if joined:
                _check_input(idx, block, joined)
            continue
        assert isinstance(block, _BLOCK_TYPE[kinds[idx]]), (
            f"block {idx}: {type(block).__name__} started as {kinds[idx]}"
        )
        joined = "".join(texts[idx])
        if isinstance(block, TextContent):
            assert joined == block.text, (
                f"block {idx}: text deltas do not concatenate to the final text"
            )
        elif isinstance(block, ThinkingContent):
            assert joined == block.thinking, (
                f"block {idx}: thinking deltas do not concatenate to the final thinking"
            )
        else:
            _check_arguments(idx, block, joined)


def _check_arguments(idx: int, block: ToolCall, joined: str) -> None:
    from stream_core._decoding.json_values import is_storable_json
    from stream_core.provider import ArgumentsError, parse_arguments

    try:
        parsed: Any = parse_arguments(joined)
    except ArgumentsError:
        assert block.truncated, (
            f"block {idx}: tool call with invalid JSON arguments must be truncated"
        )
        return
    if block.truncated and not is_storable_json(parsed):
        return  # valid JSON a message cannot hold (nested too deep, 1e400): cut, not kept
    assert parsed == block.arguments, (
        f"block {idx}: toolcall deltas do not concatenate to the final arguments"
    )


def _check_input(idx: int, block: Any, joined: str) -> None:
    """A server call's input deltas, joined, are the input it holds (when they parse)."""
    from stream_core.provider import ArgumentsError, parse_arguments

    try:
        parsed: Any = parse_arguments(joined)
    except ArgumentsError:
        return  # cut: the call holds what parses of it
    assert parsed == getattr(block, "input", None), (
        f"block {idx}: block_delta fragments do not concatenate to the call's input"
    )
