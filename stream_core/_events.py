"""The event sequence every provider produces (CONTRACT 2).

    message_start (message) . message_update (message, delta)* . message_end (message)

Events are slotted dataclasses built once per vendor delta; `message` is the live message
(the same object every time), so nothing is copied per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._types import AssistantMessage, Citation

__all__ = [
    "AssistantStreamEvent",
    "BlockDelta",
    "BlockEnd",
    "BlockStart",
    "CitationAdded",
    "Delta",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "event_to_json",
]


# Printing an event costs O(1) in the size of the message (CONTRACT 5): a summary, never
# the live message or the delta's text (which may be long, and is the model's output).
# `repr(event.message)` prints the message in full when that is what is wanted.


def _mark_repr(self: Any) -> str:
    return f"<{self.type} content_index={self.content_index}>"


def _delta_repr(self: Any) -> str:
    return f"<{self.type} content_index={self.content_index} len={len(self.delta)}>"


def _event_repr(self: Any) -> str:
    m = self.message
    inner = f" {self.delta!r}" if self.type == "message_update" else ""
    tail = f" stop_reason={m.stop_reason}" if self.type == "message_end" else ""
    return f"<{self.type}{inner} blocks={len(m.content)}{tail}>"


@dataclass(slots=True, repr=False)
class TextStart:
    """A text block opened at `content_index`; its `text_delta`s follow."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["text_start"] = field(default="text_start", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class TextDelta:
    """A piece of a text block's text; the deltas of a block, joined, are its final text."""

    content_index: int
    """Position of the block in `message.content`."""
    delta: str
    """The new text (never empty)."""
    type: Literal["text_delta"] = field(default="text_delta", init=False)

    __repr__ = _delta_repr


@dataclass(slots=True, repr=False)
class TextEnd:
    """The text block at `content_index` is complete (sent on error and abort too)."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["text_end"] = field(default="text_end", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class ThinkingStart:
    """A thinking (reasoning) block opened at `content_index`."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["thinking_start"] = field(default="thinking_start", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class ThinkingDelta:
    """A piece of a thinking block's text; joined, the deltas are its final text."""

    content_index: int
    """Position of the block in `message.content`."""
    delta: str
    """The new thinking text (never empty)."""
    type: Literal["thinking_delta"] = field(default="thinking_delta", init=False)

    __repr__ = _delta_repr


@dataclass(slots=True, repr=False)
class ThinkingEnd:
    """The thinking block at `content_index` is complete (sent on error and abort too)."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["thinking_end"] = field(default="thinking_end", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class ToolCallStart:
    """A tool-call block opened at `content_index`, with the `id` and `name` known so far
    (a vendor that sends them later updates the block)."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["toolcall_start"] = field(default="toolcall_start", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class ToolCallDelta:
    """A piece of a tool call's argument text, as the vendor streamed it."""

    content_index: int
    """Position of the block in `message.content`."""
    delta: str
    """A raw fragment of the arguments' JSON text (never empty)."""
    type: Literal["toolcall_delta"] = field(default="toolcall_delta", init=False)

    __repr__ = _delta_repr


@dataclass(slots=True, repr=False)
class ToolCallEnd:
    """The tool call at `content_index` is complete: `arguments` is parsed, or the call
    is marked `truncated` (sent on error and abort too)."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["toolcall_end"] = field(default="toolcall_end", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class BlockStart:
    """A block of another kind opened at `content_index`: `kind` is its `type`
    (`server_tool_call`, `server_tool_result`, `file`, `approval_request`, `vendor`, ...),
    so a UI can show "searching the web" while the vendor runs it."""

    content_index: int
    """Position of the block in `message.content`."""
    kind: str
    """The block's `type` (`BLOCK_KINDS`)."""
    type: Literal["block_start"] = field(default="block_start", init=False)

    def __repr__(self) -> str:
        return f"<block_start content_index={self.content_index} kind={self.kind}>"


@dataclass(slots=True, repr=False)
class BlockDelta:
    """A piece of such a block's streamed JSON input (a server tool call's arguments)."""

    content_index: int
    """Position of the block in `message.content`."""
    delta: str
    """A raw fragment of the input's JSON text (never empty)."""
    type: Literal["block_delta"] = field(default="block_delta", init=False)

    __repr__ = _delta_repr


@dataclass(slots=True, repr=False)
class BlockEnd:
    """The block at `content_index` is complete (sent on error and abort too)."""

    content_index: int
    """Position of the block in `message.content`."""
    type: Literal["block_end"] = field(default="block_end", init=False)

    __repr__ = _mark_repr


@dataclass(slots=True, repr=False)
class CitationAdded:
    """A citation attached to the text block at `content_index` (it is already in the
    block's `citations`), as the vendor sent it: with its text, or once the text is done."""

    content_index: int
    """Position of the text block in `message.content`."""
    citation: Citation
    type: Literal["citation"] = field(default="citation", init=False)

    __repr__ = _mark_repr


Delta = (
    TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | BlockStart
    | BlockDelta
    | BlockEnd
    | CitationAdded
)
"""The change one `MessageUpdate` carries, told apart by `type` (`text_start`,
`toolcall_delta`, ...); every kind has `content_index`, the `*Delta` kinds also `delta`."""


@dataclass(slots=True, repr=False)
class MessageStart:
    """The first event of every stream, exactly once, queued before the request goes out."""

    message: AssistantMessage
    """The live message being built (the same object in every event of the stream)."""
    type: Literal["message_start"] = field(default="message_start", init=False)

    __repr__ = _event_repr


@dataclass(slots=True, repr=False)
class MessageUpdate:
    """One change to the message: `delta` says which block and what arrived."""

    message: AssistantMessage
    """The live message being built (the same object in every event of the stream)."""
    delta: Delta
    """What changed: a block's start, a piece of its text, or its end."""
    type: Literal["message_update"] = field(default="message_update", init=False)

    __repr__ = _event_repr


@dataclass(slots=True, repr=False)
class MessageEnd:
    """The last event of every stream, exactly once, also on error and abort: `message` is
    final (`stop_reason` and `usage` set, and `error` when it failed)."""

    message: AssistantMessage
    """The final message (the same object the earlier events carried)."""
    type: Literal["message_end"] = field(default="message_end", init=False)

    __repr__ = _event_repr


AssistantStreamEvent = MessageStart | MessageUpdate | MessageEnd
"""Any event of a stream, told apart by `type`: `message_start` once, `message_update`s,
`message_end` once."""


def event_to_json(event: AssistantStreamEvent) -> dict[str, Any]:
    """The stable JSON form of an event (the CLI's `--events` output).

    `message_update` carries its delta (`type`, `content_index`, and `delta` for the
    `*_delta` kinds; `toolcall_end` adds the parsed `arguments`); `message_end` carries the
    final message.
    """
    if isinstance(event, MessageUpdate):
        d = event.delta
        out: dict[str, Any] = {"type": d.type, "content_index": d.content_index}
        if isinstance(d, (TextDelta, ThinkingDelta, ToolCallDelta, BlockDelta)):
            out["delta"] = d.delta
        elif isinstance(d, BlockStart):
            out["kind"] = d.kind
        elif isinstance(d, BlockEnd):
            out["block"] = event.message.content[d.content_index].model_dump(mode="json")
        elif isinstance(d, CitationAdded):
            out["citation"] = d.citation.model_dump(mode="json")
        elif isinstance(d, ToolCallEnd):
            block = event.message.content[d.content_index]
            out["arguments"] = getattr(block, "arguments", {})
        return {"type": "message_update", "delta": out}
    if isinstance(event, MessageEnd):
        return {"type": "message_end", "message": event.message.model_dump(mode="json")}
    return {"type": "message_start"}
