"""Bedrock Converse's messages: a context's turns as the `messages` of a Converse request
(alternating turns, tool results as `toolResult` blocks, images as base64 blobs, Claude's
signed reasoning sent back verbatim), for `providers/bedrock.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.provider import (
    BEDROCK_IMAGE_FORMATS,
    IMAGE_OMITTED_TEXT,
    id_normalizer,
    prepare_messages,
)

__all__ = ["API", "CLAUDE", "convert_messages"]

API = "bedrock-converse-stream"
"""The wire API `providers/bedrock.py` serves."""
CLAUDE = "anthropic.claude"
"""What a Claude model's Bedrock id holds."""

_normalize_id = id_normalizer(allowed=r"A-Za-z0-9_-", max_length=64)


def convert_messages(
    model: Model, context: Context, cache: dict[str, Any] | None
) -> list[dict[str, Any]]:
    messages = prepare_messages(
        context, api=API, provider=model.provider, model_id=model.id, normalize_id=_normalize_id
    )
    vision = "image" in model.input
    claude = CLAUDE in model.id
    out: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]]
    for m in messages:
        if isinstance(m, UserMessage):
            blocks, role = _user_blocks(m.content, vision=vision), "user"
        elif isinstance(m, ToolResultMessage):
            content: list[dict[str, Any]] = _user_blocks(m.content, vision=vision) or [
                {"text": "(no output)"}
            ]
            result: dict[str, Any] = {
                "toolUseId": m.tool_call_id,
                "content": content,
                "status": "error" if m.is_error else "success",
            }
            blocks, role = [{"toolResult": result}], "user"
        else:
            blocks, role = _assistant_blocks(m, claude=claude), "assistant"
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            # Converse wants turns to alternate: results and a following prompt share one.
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if cache and out and out[-1]["role"] == "user":
        out[-1]["content"].append(cache)
    return out


def _user_blocks(content: str | Sequence[object], *, vision: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                blocks.append({"text": b.text})
            continue
        if not isinstance(b, ImageContent):
            continue  # UnknownContent: kept in the history, never sent
        if not vision:
            blocks.append({"text": IMAGE_OMITTED_TEXT})
        else:
            # Other types were replaced by a note at `stream()` (the per-model rules'
            # IMAGE_TYPES). The REST API takes blob fields as base64 text, as ImageContent
            # holds them.
            image_format = BEDROCK_IMAGE_FORMATS[b.mime_type.lower()]
            blocks.append({"image": {"format": image_format, "source": {"bytes": b.data}}})
    return blocks


def _assistant_blocks(m: AssistantMessage, *, claude: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextContent):
            if b.text.strip():
                blocks.append({"text": b.text})
        elif isinstance(b, ThinkingContent):
            if b.redacted:
                if b.signature:
                    blocks.append({"reasoningContent": {"redactedContent": b.signature}})
            elif not b.thinking.strip():
                continue
            elif b.signature or not claude:
                # Same-model thinking goes back verbatim: the signature covers the text.
                reasoning: dict[str, Any] = {"text": b.thinking}
                if b.signature:
                    reasoning["signature"] = b.signature
                blocks.append({"reasoningContent": {"reasoningText": reasoning}})
            else:
                blocks.append({"text": b.thinking})  # Claude rejects unsigned reasoning
        elif isinstance(b, ToolCall):
            blocks.append({"toolUse": {"toolUseId": b.id, "name": b.name, "input": b.arguments}})
    return blocks
