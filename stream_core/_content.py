"""Content blocks: what a message holds (text, thinking, images, tool calls, and blocks of
types we don't know, kept as they are). Part of the data model (`_types` re-exports them)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    RootModel,
    Tag,
    ValidationInfo,
)

__all__ = [
    "KEEP_UNKNOWN_BLOCKS",
    "AssistantContent",
    "ImageContent",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "UnknownContent",
    "UserContent",
]


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Model(BaseModel):
    # Unknown fields are kept so a record written by a newer version survives a round trip.
    model_config = ConfigDict(extra="allow", defer_build=True)


# --- content blocks ---------------------------------------------------------------------


class TextContent(_Model):
    """A block of text: in a user message, a tool result, or the assistant's answer."""

    type: Literal["text"] = "text"
    text: str = ""
    text_signature: str | None = None
    """Vendor id or signature of the text part, sent back verbatim to the same model."""


class ThinkingContent(_Model):
    """The model's reasoning, as the vendor showed it (a summary, the full text, or nothing but
    an encrypted payload when `redacted`). Sent back verbatim to the same model; another
    model gets it as text (`prepare_messages`)."""

    type: Literal["thinking"] = "thinking"
    thinking: str = ""
    signature: str | None = None
    """Opaque vendor signature (Anthropic), or the delta field the reasoning came from."""
    redacted: bool = False
    """True when the vendor sent only an encrypted payload (kept in `signature`)."""


class ImageContent(_Model):
    """An image in a user message or a tool result: base64 `data` and its `mime_type`
    (`image/png`, ...). Sent only to models whose `Model.input` lists `image`; others get
    `IMAGE_OMITTED_TEXT` in its place."""

    type: Literal["image"] = "image"
    data: str
    """Base64-encoded image bytes."""
    mime_type: str


class ToolCall(_Model):
    """A tool call the model made: `id` (unique in the message; the vendor's, or made up when
    it sent none), the tool `name` and the parsed `arguments`. Answer it with one
    `ToolResultMessage` of the same `tool_call_id`; never run one that is `truncated`."""

    type: Literal["tool_call"] = "tool_call"
    id: str = ""
    name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = None
    truncated: bool = False
    """The call is not to be executed: the output limit cut it, or its arguments are not
    valid JSON. `fail_truncated_tool_calls` answers it with an error result."""
    partial_json: str = Field(default="", exclude=True, repr=False)
    """The raw argument text received so far, while the call streams (not persisted)."""

    def partial_arguments(self) -> Any:
        """Best-effort parse of the arguments received so far (on demand, never per delta)."""
        from ._decoding.json_values import parse_partial_json

        return parse_partial_json(self.partial_json) if self.partial_json else self.arguments


class UnknownContent(RootModel[dict[str, Any]]):
    """A block whose `type` this version does not know (a vendor's newer block such as
    `server_tool_use`, in a history written by a newer version), kept exactly as loaded:
    `dump_messages` writes it back unchanged and no provider sends it.

    Only `load_messages` (or validation with `context=KEEP_UNKNOWN_BLOCKS`) makes one:
    elsewhere an unknown type is an error, so a typo is never silently left out of a request.
    """

    model_config = ConfigDict(defer_build=True)

    @property
    def type(self) -> str:
        return str(self.root.get("type"))


_KEEP = "stream_core.keep_unknown_blocks"
KEEP_UNKNOWN_BLOCKS: dict[str, bool] = {_KEEP: True}
"""Validation context that keeps blocks of unknown types as `UnknownContent`
(`AssistantMessage.model_validate(data, context=KEEP_UNKNOWN_BLOCKS)`)."""


def _tagger(*known: str) -> Any:
    def tag(value: Any) -> str | None:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if not isinstance(kind, str):
            return None  # no tag: pydantic names the missing discriminator
        return kind if kind in known else "unknown"

    return Discriminator(
        tag,
        custom_error_type="missing_block_type",
        custom_error_message=f"a content block needs a string `type` ({', '.join(known)})",
    )


def _known_block(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, UnknownContent) and not (info.context or {}).get(_KEEP):
        raise ValueError(
            f"unknown content type {value.type!r} (load_messages keeps such blocks as they are)"
        )
    return value


AssistantContent = Annotated[
    Annotated[TextContent, Tag("text")]
    | Annotated[ThinkingContent, Tag("thinking")]
    | Annotated[ToolCall, Tag("tool_call")]
    | Annotated[UnknownContent, Tag("unknown")],
    _tagger("text", "thinking", "tool_call"),
    AfterValidator(_known_block),
]
UserContent = Annotated[
    Annotated[TextContent, Tag("text")]
    | Annotated[ImageContent, Tag("image")]
    | Annotated[UnknownContent, Tag("unknown")],
    _tagger("text", "image"),
    AfterValidator(_known_block),
]
