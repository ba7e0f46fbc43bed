"""Content blocks: what a message holds (text, thinking, images, tool calls, and blocks of
types we don't know, kept as they are). Part of the data model (`_types` re-exports them)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

__all__ = [
    "KEEP_UNKNOWN_BLOCKS",
    "Citation",
    "Source",
    "ImageContent",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "UnknownContent",
]


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Model(BaseModel):
    # Unknown fields are kept so a record written by a newer version survives a round trip.
    model_config = ConfigDict(extra="allow", defer_build=True)


# --- content blocks ---------------------------------------------------------------------


def _not_none(value: Any) -> bool:
    return value is None


def _label(name: str, where: str) -> str:
    return f"{name} <{where}>" if name and where else name or where


class Source(_Model):
    """One thing a server tool found: a web page (`url`, `title`), or a file chunk
    (`file_id`, `filename`, `score`), with a snippet in `text` when the vendor sent one."""

    url: str | None = Field(default=None, exclude_if=_not_none)
    title: str | None = Field(default=None, exclude_if=_not_none)
    file_id: str | None = Field(default=None, exclude_if=_not_none)
    filename: str | None = Field(default=None, exclude_if=_not_none)
    text: str | None = Field(default=None, exclude_if=_not_none)
    score: float | None = Field(default=None, exclude_if=_not_none)

    def label(self) -> str:
        """`title <url>` (or the file's name and id), for text."""
        return _label(self.title or self.filename or "", self.url or self.file_id or "")


class Citation(_Model):
    """A source the text it is attached to (`TextContent.citations`) rests on: a web page
    (`url`, `title`), a document of the request (`document_index`, `title`) or a file
    (`file_id`, `filename`); the `cited_text` when the vendor quotes it; `start`/`end`, the
    span of the block's text it supports (code points; both None: the whole block). `raw`
    is the vendor's record verbatim (encrypted indices included), sent back to its API."""

    url: str | None = Field(default=None, exclude_if=_not_none)
    title: str | None = Field(default=None, exclude_if=_not_none)
    file_id: str | None = Field(default=None, exclude_if=_not_none)
    filename: str | None = Field(default=None, exclude_if=_not_none)
    document_index: int | None = Field(default=None, exclude_if=_not_none)
    cited_text: str | None = Field(default=None, exclude_if=_not_none)
    start: int | None = Field(default=None, exclude_if=_not_none)
    end: int | None = Field(default=None, exclude_if=_not_none)
    raw: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)

    def label(self) -> str:
        """`title <url>` (or the document or file it names), for text."""
        where = self.url or self.file_id or ""
        if not where and self.document_index is not None:
            where = f"document {self.document_index}"
        return _label(self.title or self.filename or "", where)


class TextContent(_Model):
    """A block of text: in a user message, a tool result, or the assistant's answer."""

    type: Literal["text"] = "text"
    text: str = ""
    text_signature: str | None = None
    """Vendor id or signature of the text part, sent back verbatim to the same model."""
    citations: list[Citation] | None = Field(default=None, exclude_if=_not_none)
    """The sources this text rests on, as the vendor cited them (None: it cited none)."""


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
    caller: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)
    """Who made the call when it is not the model itself (Anthropic programmatic calls:
    the code execution that waits for its result), sent back with it."""
    builtin: str | None = Field(default=None, exclude_if=_not_none)
    """The vendor's item type for a built-in call the caller runs (OpenAI Responses
    `shell_call`, `local_shell_call`, `apply_patch_call`, `custom_tool_call`,
    `tool_search_call`): its result goes back as that item's output type."""
    raw: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)
    """The vendor's item verbatim, for a built-in call (sent back to the same API)."""
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
