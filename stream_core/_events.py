"""The event sequence every provider produces (CONTRACT 2).

    message_start (message) . message_update (message, delta)* . message_end (message)

Events are slotted dataclasses built once per vendor delta; `message` is the live message
(the same object every time), so nothing is copied per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._types import AssistantMessage

__all__ = [
    "AssistantStreamEvent",
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


@dataclass(slots=True)
class TextStart:
    content_index: int
    type: Literal["text_start"] = field(default="text_start", init=False)


@dataclass(slots=True)
class TextDelta:
    content_index: int
    delta: str
    type: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(slots=True)
class TextEnd:
    content_index: int
    type: Literal["text_end"] = field(default="text_end", init=False)


@dataclass(slots=True)
class ThinkingStart:
    content_index: int
    type: Literal["thinking_start"] = field(default="thinking_start", init=False)


@dataclass(slots=True)
class ThinkingDelta:
    content_index: int
    delta: str
    type: Literal["thinking_delta"] = field(default="thinking_delta", init=False)


@dataclass(slots=True)
class ThinkingEnd:
    content_index: int
    type: Literal["thinking_end"] = field(default="thinking_end", init=False)


@dataclass(slots=True)
class ToolCallStart:
    content_index: int
    type: Literal["toolcall_start"] = field(default="toolcall_start", init=False)


@dataclass(slots=True)
class ToolCallDelta:
    content_index: int
    delta: str
    """A raw fragment of the arguments' JSON text (may be empty)."""
    type: Literal["toolcall_delta"] = field(default="toolcall_delta", init=False)


@dataclass(slots=True)
class ToolCallEnd:
    content_index: int
    type: Literal["toolcall_end"] = field(default="toolcall_end", init=False)


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
)


@dataclass(slots=True)
class MessageStart:
    message: AssistantMessage
    type: Literal["message_start"] = field(default="message_start", init=False)


@dataclass(slots=True)
class MessageUpdate:
    message: AssistantMessage
    delta: Delta
    type: Literal["message_update"] = field(default="message_update", init=False)


@dataclass(slots=True)
class MessageEnd:
    message: AssistantMessage
    type: Literal["message_end"] = field(default="message_end", init=False)


AssistantStreamEvent = MessageStart | MessageUpdate | MessageEnd


def event_to_json(event: AssistantStreamEvent) -> dict[str, Any]:
    """The stable JSON form of an event (the CLI's `--events` output).

    `message_update` carries its delta (`type`, `content_index`, and `delta` for the
    `*_delta` kinds; `toolcall_end` adds the parsed `arguments`); `message_end` carries the
    final message.
    """
    if isinstance(event, MessageUpdate):
        d = event.delta
        out: dict[str, Any] = {"type": d.type, "content_index": d.content_index}
        if isinstance(d, (TextDelta, ThinkingDelta, ToolCallDelta)):
            out["delta"] = d.delta
        elif isinstance(d, ToolCallEnd):
            block = event.message.content[d.content_index]
            out["arguments"] = getattr(block, "arguments", {})
        return {"type": "message_update", "delta": out}
    if isinstance(event, MessageEnd):
        return {"type": "message_end", "message": event.message.model_dump(mode="json")}
    return {"type": "message_start"}
