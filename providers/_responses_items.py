"""A finished Responses output item as assembler calls: a message's text (completing what
streamed, or all of it when nothing did), a reasoning item's summary and encrypted content,
a function call's arguments. Shared by the streamed translator (`response.output_item.done`)
and the reader of a whole, non-streamed response."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from stream_core import TextContent, ThinkingContent, ToolCall
from stream_core.provider import Assembler, as_object, optional_field

__all__ = ["call_done", "message_done", "reasoning_done"]


def complete_text(asm: Assembler, key: Hashable, final: str, *, thinking: bool) -> None:
    """Send what the deltas did not: the final text's rest when the streamed text is its
    start (otherwise the deltas stand: they are what the caller saw)."""
    block = asm.block(key)
    if isinstance(block, TextContent):
        streamed = block.text
    elif isinstance(block, ThinkingContent):
        streamed = block.thinking
    else:
        streamed = ""
    if len(final) > len(streamed) and final.startswith(streamed):
        rest = final[len(streamed) :]
        if thinking:
            asm.thinking(key, rest)
        else:
            asm.text(key, rest)


def message_done(asm: Assembler, key: Hashable, item: dict[str, Any], where: str) -> None:
    texts: list[str] = []
    refusal: str | None = None
    for raw in optional_field(item, "content", list, where) or ():
        part = as_object(raw, f"{where}.content[]")
        ptype = optional_field(part, "type", str, f"{where}.content[]")
        if ptype == "output_text":
            texts.append(optional_field(part, "text", str, f"{where}.content[]") or "")
        elif ptype == "refusal":
            refusal = optional_field(part, "refusal", str, f"{where}.content[]") or ""
            texts.append(refusal)
    complete_text(asm, key, "".join(texts), thinking=False)
    if refusal is not None:
        asm.set_stop_reason(None, detail=refusal[:200] or "refusal", rule="refusal")
    block = asm.block(key)
    if isinstance(block, TextContent):
        signature: dict[str, str] = {}
        item_id = optional_field(item, "id", str, where)
        if item_id:
            signature["id"] = item_id
        phase = optional_field(item, "phase", str, where)
        if phase:
            signature["phase"] = phase
        if signature:
            block.text_signature = json.dumps(signature, separators=(",", ":"))
    asm.end(key)


def reasoning_done(asm: Assembler, key: Hashable, item: dict[str, Any], where: str) -> None:
    texts = part_texts(item, "summary", where) or part_texts(item, "content", where)
    complete_text(asm, key, "\n\n".join(texts), thinking=True)
    encrypted = optional_field(item, "encrypted_content", str, where)
    block = asm.block(key)
    if encrypted:
        if block is None:
            # Reasoning with no summary text: an empty block carries the encrypted item.
            asm.start_thinking(key, redacted=True)
        asm.thinking_signature(key, json.dumps(item, ensure_ascii=False, separators=(",", ":")))
    asm.end(key)


def part_texts(item: dict[str, Any], field: str, where: str) -> list[str]:
    out = []
    for raw in optional_field(item, field, list, where) or ():
        part = as_object(raw, f"{where}.{field}[]")
        text = optional_field(part, "text", str, f"{where}.{field}[]")
        if text:
            out.append(text)
    return out


def call_done(asm: Assembler, key: Hashable, item: dict[str, Any], where: str) -> None:
    call_id = optional_field(item, "call_id", str, where) or None
    name = optional_field(item, "name", str, where) or None
    arguments = optional_field(item, "arguments", str, where) or ""
    block = asm.block(key)
    if isinstance(block, ToolCall):
        if call_id or name:
            asm.tool_call(key, "", id=call_id, name=name)
        streamed = block.partial_json
    elif isinstance(block, TextContent):
        # The structured-output tool (tool mode): the assembler streams its arguments as
        # the answer's text.
        streamed = block.text
    else:
        asm.start_tool_call(key, id=call_id or "", name=name or "")
        block = asm.block(key)
        streamed = ""
    if len(arguments) > len(streamed) and arguments.startswith(streamed):
        asm.tool_call(key, arguments[len(streamed) :])
    item_id = optional_field(item, "id", str, where)
    if item_id and isinstance(block, ToolCall):
        block.thought_signature = item_id
    asm.end(key)
