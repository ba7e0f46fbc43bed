"""A history as the Messages API's `messages` (and what the request needs besides because
of it: the container to reuse, a beta a block needs). Blocks of the families in
`_anthropic_blocks` go back as that module writes them; user files become `document` or
`image` blocks.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stream_core import (
    AssistantMessage,
    Context,
    FileContent,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import IMAGE_OMITTED_TEXT, id_normalizer, prepare_messages

from ._anthropic_blocks import (
    API,
    FILES_BETA,
    encode_block,
    encode_citation,
)

__all__ = ["Converted", "convert_messages", "loop_allows_thinking"]

_normalize_id = id_normalizer(allowed=r"A-Za-z0-9_-", max_length=64)


@dataclass
class Converted:
    messages: list[dict[str, Any]] = field(default_factory=list)
    container: str | None = None
    """The code-execution container of the last answer, to reuse (`container`)."""
    betas: list[str] = field(default_factory=list)


def convert_messages(model: Model, context: Context, cache: dict[str, str] | None) -> Converted:
    messages = prepare_messages(
        context, api=API, provider=model.provider, model_id=model.id, normalize_id=_normalize_id
    )
    vision = "image" in model.input
    conv = Converted()
    out = conv.messages
    results: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": _user_blocks(m.content, conv, vision=vision) or "(no output)",
                    "is_error": m.is_error,
                }
            )
            continue
        if results:
            out.append({"role": "user", "content": results})
            results = []
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                blocks = [{"type": "text", "text": m.content}] if m.content.strip() else []
            else:
                blocks = _user_blocks(m.content, conv, vision=vision)
            if blocks:
                if out and out[-1]["role"] == "user":
                    # Right after tool results: one user turn (results first, then the text),
                    # so roles keep alternating.
                    out[-1]["content"] += blocks
                else:
                    out.append({"role": "user", "content": blocks})
        else:
            same = m.api == API and m.provider == model.provider
            container = m.container.get("id") if same and m.container else None
            if isinstance(container, str) and container:
                # The latest container this API reported: an answer that used none since
                # leaves it as it was (a new one would lose the files made in it).
                conv.container = container
            blocks = _assistant_blocks(m)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    if results:
        out.append({"role": "user", "content": results})
    if cache and out and out[-1]["role"] == "user":
        last = out[-1]["content"][-1]
        out[-1]["content"][-1] = {**last, "cache_control": cache}
    return conv


def _user_blocks(content: Sequence[object], conv: Converted, *, vision: bool) -> list[Any]:
    blocks: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                blocks.append({"type": "text", "text": b.text})
        elif isinstance(b, FileContent):
            blocks.append(_file_block(b, conv, vision=vision))
        elif isinstance(b, VendorContent):
            blocks.append(b.data)  # the vendor's own block (same API: `prepare_messages`)
        elif not isinstance(b, ImageContent):
            continue  # UnknownContent: kept in the history, never sent
        elif vision:
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": b.mime_type, "data": b.data},
                }
            )
        else:
            blocks.append({"type": "text", "text": IMAGE_OMITTED_TEXT})
    return blocks


def _file_block(f: FileContent, conv: Converted, *, vision: bool) -> dict[str, Any]:
    """A file as a `document` (PDF, plain text) or `image` block, by data, URL or an
    uploaded file's id (Files API, which needs its beta)."""
    image = (f.mime_type or "").startswith("image/")
    if image and not vision:
        return {"type": "text", "text": IMAGE_OMITTED_TEXT}
    source: dict[str, Any]
    if f.file_id is not None:
        source = {"type": "file", "file_id": f.file_id}
        if FILES_BETA not in conv.betas:
            conv.betas.append(FILES_BETA)
    elif f.data is not None:
        if f.mime_type == "text/plain":
            text = base64.b64decode(f.data).decode("utf-8", errors="replace")
            source = {"type": "text", "media_type": "text/plain", "data": text}
        else:
            source = {"type": "base64", "media_type": f.mime_type, "data": f.data}
    else:
        source = {"type": "url", "url": f.url}
    if image:
        return {"type": "image", "source": source}
    out: dict[str, Any] = {"type": "document", "source": source}
    if f.name:
        out["title"] = f.name
    if f.citations:
        out["citations"] = {"enabled": True}
    return out


def _assistant_blocks(m: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    content = m.content
    for i, b in enumerate(content):
        if isinstance(b, TextContent):
            if b.text.strip():
                text: dict[str, Any] = {"type": "text", "text": b.text}
                if b.citations:
                    text["citations"] = [encode_citation(c) for c in b.citations]
                blocks.append(text)
        elif isinstance(b, ThinkingContent):
            if b.redacted:
                if b.signature:
                    blocks.append({"type": "redacted_thinking", "data": b.signature})
            elif not b.thinking.strip():
                continue
            elif b.signature:
                # Same-model thinking goes back verbatim: the signature covers the text.
                blocks.append(
                    {"type": "thinking", "thinking": b.thinking, "signature": b.signature}
                )
            else:
                blocks.append({"type": "text", "text": b.thinking})
        elif isinstance(b, ToolCall):
            call: dict[str, Any] = {
                "type": "tool_use", "id": b.id, "name": b.name, "input": b.arguments
            }  # fmt: skip
            if b.caller is not None:
                call["caller"] = b.caller  # a programmatic call: its code run waits for it
            blocks.append(call)
        else:
            # Server calls and results, vendor blocks: as the vendor sent them (`raw`); a
            # file a code run wrote is carried by its result block (the Messages API has
            # no block for it alone). Anything else raises, naming the block.
            try:
                block = encode_block(b, content[i + 1 :])
            except ValueError as e:
                raise ValueError(
                    f"context.messages: {API} cannot take back a {type(b).__name__} block "
                    f"in an assistant message (content[{i}]): {e}"
                ) from None
            if block is not None:
                blocks.append(block)
    return blocks


def loop_allows_thinking(messages: list[dict[str, Any]]) -> bool:
    """Whether thinking may be enabled for this request.

    Anthropic's rule: a tool loop runs in one thinking mode, so with thinking on, the last
    assistant turn with a tool call since the user last wrote must start with a (signed,
    same-model) thinking block; otherwise the request is rejected. Such a loop (after a
    handoff, a model switch, or a turn made without thinking) continues without thinking,
    as the vendor documents. Other models' thinking arrives here as text, and unsigned
    thinking too, so the check reads the wire blocks.
    """
    for message in reversed(messages):
        blocks = message["content"]
        if message["role"] == "user":
            if any(b.get("type") != "tool_result" for b in blocks):
                return True  # the user wrote: no tool loop is open
        elif any(b.get("type") == "tool_use" for b in blocks):
            return blocks[0].get("type") in ("thinking", "redacted_thinking")
    return True
