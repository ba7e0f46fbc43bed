"""A context as the Responses API's `input`: messages, function calls and their outputs as
items, reasoning items (encrypted content, summaries) sent back to the model that made
them, and another vendor's turns prepared for this one."""

from __future__ import annotations

import json
from collections.abc import Sequence
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
)
from stream_core.provider import (
    IMAGE_OMITTED_TEXT,
    TOOL_ERROR_PREFIX,
    id_normalizer,
    prepare_messages,
)

from ._responses_builtin_out import (
    annotation,
    assistant_block_item,
    builtin_call_item,
    file_part,
    output_item,
    user_item,
)

__all__ = ["convert_messages"]

_normalize_id = id_normalizer(allowed=r"A-Za-z0-9_-", max_length=64)


def convert_messages(model: Model, context: Context, api: str) -> list[dict[str, Any]]:
    vision = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        role = "developer" if model.reasoning else "system"
        out.append({"role": role, "content": context.system_prompt})
    messages = prepare_messages(
        context, api=api, provider=model.provider, model_id=model.id, normalize_id=_normalize_id
    )
    builtins: dict[str, ToolCall] = {}
    """Caller-run built-in calls by id: their results go back as their own item type."""
    for m in messages:
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                if m.content.strip():
                    out.append(
                        {"role": "user", "content": [{"type": "input_text", "text": m.content}]}
                    )
            else:
                out += _user_items(m.content, vision=vision)
        elif isinstance(m, AssistantMessage):
            out += _assistant_items(m)
            builtins.update((b.id, b) for b in m.content if isinstance(b, ToolCall) and b.builtin)
        elif m.tool_call_id in builtins:
            out.append(output_item(builtins[m.tool_call_id], m))
        else:
            out.append(_tool_output(m, vision=vision))
    return out


def _user_items(content: Sequence[object], *, vision: bool) -> list[dict[str, Any]]:
    """A user message's blocks: content parts in one message, except approval answers and
    the API's own items, which are items of their own (in order)."""
    out: list[dict[str, Any]] = []
    run: list[object] = []
    for b in content:
        item = user_item(b)
        if item is None:
            run.append(b)
            continue
        parts = _input_parts(run, vision=vision)
        if parts:
            out.append({"role": "user", "content": parts})
        run = []
        out.append(item)
    parts = _input_parts(run, vision=vision)
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _input_parts(content: Sequence[object], *, vision: bool) -> list[Any]:
    parts: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                parts.append({"type": "input_text", "text": b.text})
        elif isinstance(b, FileContent):
            parts.append(file_part(b))
        elif not isinstance(b, ImageContent):
            continue  # a block of a type we do not know: kept in the history, never sent
        elif vision:
            parts.append(
                {
                    "type": "input_image",
                    "detail": "auto",
                    "image_url": f"data:{b.mime_type};base64,{b.data}",
                }
            )
        else:
            parts.append({"type": "input_text", "text": IMAGE_OMITTED_TEXT})
    return parts


def _tool_output(m: ToolResultMessage, *, vision: bool) -> dict[str, Any]:
    text = "\n".join(b.text for b in m.content if isinstance(b, TextContent))
    has_image = any(isinstance(b, ImageContent) for b in m.content)
    output: str | list[dict[str, Any]]
    if (has_image and vision) or any(isinstance(b, FileContent) for b in m.content):
        output = _input_parts(m.content, vision=vision)
    else:
        output = text or ("(see attached image)" if has_image else "(no output)")
    if m.is_error:
        # The item has no error flag: the model reads it in the output.
        if isinstance(output, str):
            output = TOOL_ERROR_PREFIX + output
        else:
            output = [{"type": "input_text", "text": TOOL_ERROR_PREFIX}, *output]
    return {"type": "function_call_output", "call_id": m.tool_call_id, "output": output}


def _assistant_items(m: AssistantMessage) -> list[dict[str, Any]]:
    """Items for one assistant turn. After `prepare_messages`, vendor artifacts (reasoning
    items, item ids) are left only on turns the target model wrote itself."""
    items: list[dict[str, Any]] = []
    # OpenAI pairs a reasoning item with the item after it by id: an item id is sent only
    # when none of the turn's reasoning was left out, else the vendor rejects the orphan.
    with_ids = all(
        _reasoning_item(b) is not None for b in m.content if isinstance(b, ThinkingContent)
    )
    for b in m.content:
        if isinstance(b, ThinkingContent):
            item = _reasoning_item(b)
            if item is not None:
                items.append(item)
            # Reasoning with nothing to resend (no encrypted item) is left out.
        elif isinstance(b, TextContent):
            if not b.text.strip():
                continue
            signature = _text_signature(b.text_signature) if with_ids else {}
            if signature.get("id") or b.citations:
                # The citations go back as the annotations they came as.
                notes = [annotation(c) for c in b.citations or ()]
                message: dict[str, Any] = {"type": "message", "role": "assistant"}
                if signature.get("id"):
                    message["id"] = signature["id"]
                message["status"] = "completed"
                message["content"] = [{"type": "output_text", "text": b.text, "annotations": notes}]
                if signature.get("phase"):
                    message["phase"] = signature["phase"]
                items.append(message)
            else:
                items.append({"role": "assistant", "content": b.text})
        elif isinstance(b, ToolCall):
            if b.builtin:
                items.append(builtin_call_item(b))
                continue
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": b.id,
                "name": b.name,
                "arguments": json.dumps(b.arguments, ensure_ascii=False),
            }
            if with_ids and b.thought_signature:
                call["id"] = b.thought_signature
            namespace = (b.raw or {}).get("namespace")
            if isinstance(namespace, str):
                call["namespace"] = namespace
            if b.caller is not None:
                call["caller"] = b.caller  # a program's call: the program waits for it
            items.append(call)
        else:
            item = assistant_block_item(b)
            if item is not None:
                items.append(item)
    return items


def _reasoning_item(b: ThinkingContent) -> dict[str, Any] | None:
    if not b.signature or not b.signature.startswith("{"):
        return None
    try:
        item = json.loads(b.signature)
    except ValueError:
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    return item


def _text_signature(signature: str | None) -> dict[str, Any]:
    if not signature:
        return {}
    if not signature.startswith("{"):
        return {"id": signature}
    try:
        parsed = json.loads(signature)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
