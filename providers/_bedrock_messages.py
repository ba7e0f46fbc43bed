"""Bedrock Converse's messages: a context's turns as the `messages` of a Converse request
(alternating turns, tool results as `toolResult` blocks, images as base64 blobs, Claude's
signed reasoning sent back verbatim; documents, citations, server tools' blocks and vendor
blocks in the forms of `_bedrock_blocks`), for `providers/bedrock.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StreamOptions,
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

from ._bedrock_blocks import API, assistant_block, text_block, user_block

__all__ = ["API", "CLAUDE", "called_tools", "convert_messages", "sends_tools"]

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
    names: set[str] = set()  # document names, unique in a request
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if isinstance(m, UserMessage):
            blocks, role = _user_blocks(m.content, vision, names, where), "user"
        elif isinstance(m, ToolResultMessage):
            content: list[dict[str, Any]] = _user_blocks(m.content, vision, names, where) or [
                {"text": "(no output)"}
            ]
            result: dict[str, Any] = {
                "toolUseId": m.tool_call_id,
                "content": content,
                "status": "error" if m.is_error else "success",
            }
            blocks, role = [{"toolResult": result}], "user"
        else:
            blocks, role = _assistant_blocks(m, claude, where), "assistant"
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


def _user_blocks(
    content: str | Sequence[object], vision: bool, names: set[str], where: str
) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for j, b in enumerate(content):
        if isinstance(b, TextContent):
            if b.text.strip():
                blocks.append({"text": b.text})
            continue
        if not isinstance(b, ImageContent):
            block = user_block(b, names, f"{where}.content[{j}]")
            if block is not None:  # None: UnknownContent, kept in the history, never sent
                blocks.append(block)
            continue
        if not vision:
            blocks.append({"text": IMAGE_OMITTED_TEXT})
        else:
            # Other types were replaced by a note at `stream()` (the per-model rules'
            # IMAGE_TYPES). The REST API takes blob fields as base64 text, as ImageContent
            # holds them.
            image_format = BEDROCK_IMAGE_FORMATS[b.mime_type.lower()]
            blocks.append({"image": {"format": image_format, "source": {"bytes": b.data}}})
    return blocks


def _assistant_blocks(m: AssistantMessage, claude: bool, where: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for j, b in enumerate(m.content):
        if isinstance(b, TextContent):
            if b.text.strip():
                blocks.append(text_block(b))  # with its citations: `citationsContent`
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
        else:
            block = assistant_block(b, f"{where}.content[{j}]")
            if block is not None:  # None: UnknownContent, kept in the history, never sent
                blocks.append(block)
    return blocks


def called_tools(messages: list[dict[str, Any]]) -> list[str]:
    """The names of the tools the history's calls name, in order, once each."""
    calls = [b["toolUse"] for m in messages for b in m["content"] if "toolUse" in b]
    names = [c["name"] for c in calls if c.get("type") != "server_tool_use"]
    return list(dict.fromkeys(names))


def sends_tools(messages: list[dict[str, Any]], options: StreamOptions) -> bool:
    """False for `tool_choice="none"`: Converse has no such choice, so the tools stay home.
    A history with tool calls or results needs a `toolConfig`, so there it raises."""
    if options.tool_choice != "none":
        return True
    if any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"]):
        raise ValueError(
            f"StreamOptions.tool_choice: {API} has no 'none', and the tools cannot be left "
            "out of a request whose history holds tool calls or results (Converse then "
            "requires toolConfig); use 'auto'"
        )
    return False
