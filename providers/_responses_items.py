"""A finished Responses output item as assembler calls: a message's text (completing what
streamed, or all of it when nothing did), a reasoning item's summary and encrypted content,
a function call's arguments. Shared by the streamed translator (`response.output_item.done`)
and the reader of a whole, non-streamed response."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from stream_core import ServerToolCall, TextContent, ThinkingContent, ToolCall, VendorContent
from stream_core.provider import Assembler, ProtocolError, as_object, optional_field

from ._responses_builtin import (
    API,
    annotations_of,
    approval,
    citation,
    client_call,
    finish_server_call,
    result_block,
    role,
    server_tool_counts,
    start_client_call,
    start_server_call,
    stream_input,
)

__all__ = [
    "SERVER_DELTAS",
    "USAGE_PATHS",
    "Items",
    "annotation_added",
    "call_done",
    "completed_items",
    "message_done",
    "other_added",
    "other_done",
    "part_added",
    "reasoning_done",
    "server_delta",
    "server_tool_usage",
    "usage",
]


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


def message_done(
    asm: Assembler, key: Hashable, item: dict[str, Any], where: str, *, cite: bool = False
) -> None:
    """`cite`: attach the parts' annotations (no `annotation.added` event brought them)."""
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
    if cite:
        annotations_of(asm, key, item, where)
    asm.end(key)


def reasoning_done(
    asm: Assembler, key: Hashable, item: dict[str, Any], where: str
) -> ThinkingContent | None:
    """Returns the block that holds the item (None: it left none)."""
    texts = part_texts(item, "summary", where) or part_texts(item, "content", where)
    complete_text(asm, key, "\n\n".join(texts), thinking=True)
    encrypted = optional_field(item, "encrypted_content", str, where)
    block = asm.block(key)
    if encrypted:
        if block is None:
            # Reasoning with no summary text: an empty block carries the encrypted item.
            asm.start_thinking(key, redacted=True)
        asm.thinking_signature(key, json.dumps(item, ensure_ascii=False, separators=(",", ":")))
        block = asm.block(key)
    asm.end(key)
    return block if isinstance(block, ThinkingContent) and encrypted else None


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
    caller = optional_field(item, "caller", dict, where)
    if isinstance(block, ToolCall) and (caller is not None or "namespace" in item):
        # A call made by a program (`caller: {type: program, caller_id}`), or one of a
        # namespace (tool search): both go back with it.
        block.caller = caller
        block.raw = item
    asm.end(key)


# --- the other item types (server tools, built-ins, approvals, vendor items) -------------

SERVER_DELTAS = frozenset(
    {"response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta"}
)
"""Input deltas of an open server call (a shell call's command deltas are left to the
finished item: they are not JSON)."""

_SERVER, _OTHER = "server", "other"


class Items:
    """Per-stream state: what each vendor output item is, keyed like the assembler's blocks."""

    __slots__ = ("asm", "by_id", "cited", "kinds", "last_search", "offsets", "parts", "seen")

    def __init__(self, asm: Assembler) -> None:
        self.asm = asm
        self.kinds: dict[Hashable, str] = {}
        """Item key -> kind; "done" once its `output_item.done` came (later deltas ignored)."""
        self.parts: dict[Hashable, tuple[str, int]] = {}
        """Reasoning item key -> the part its last delta belonged to."""
        self.seen = False
        """An output item event arrived (else the terminal response's `output` is read)."""
        self.by_id: dict[str, Any] = {}
        """Reasoning item id -> the block holding the item (the terminal response may
        carry it re-encrypted)."""
        self.offsets: dict[tuple[Hashable, int], int] = {}
        """(message key, content part index > 0) -> where the part starts in the block."""
        self.cited: set[Hashable] = set()
        """Message keys whose annotations came as `annotation.added` events."""
        self.last_search = ""
        """The id of the last hosted tool search call (its output item names none)."""


def other_added(items: Items, key: Hashable, item: dict[str, Any], itype: str | None) -> None:
    """`output_item.added` of an item that is not a message, reasoning or function call:
    a call the vendor runs opens now (its input may stream); the rest come whole."""
    kind = role(item, itype) if itype is not None else "vendor"
    if kind == "server" and itype is not None:
        start_server_call(items.asm, key, item, itype)
        items.kinds[key] = _SERVER
    elif kind == "client" and itype is not None:
        # The harness sees the call it must run as soon as the vendor starts it; its
        # input comes with the finished item.
        start_client_call(items.asm, key, item, itype)
        items.kinds[key] = _OTHER
    else:
        items.kinds[key] = _OTHER


def other_done(
    items: Items, key: Hashable, item: dict[str, Any], itype: str | None, where: str
) -> None:
    asm = items.asm
    kind = role(item, itype)
    block: Any
    if kind == "server" and itype is not None:
        block = finish_server_call(asm, key, item, itype, where)
        if itype == "tool_search_call":
            items.last_search = block.id
    elif kind == "client" and itype is not None:
        client_call(asm, key, item, itype, where)
        block = asm.message.content[-1]
    elif kind == "result" and itype is not None:
        block = result_block(item, itype, where, items.last_search)
        asm.add_block(block)
    elif kind == "approval":
        block = approval(item, where)
        asm.add_block(block)
    else:
        block = VendorContent(api=API, data=item)
        asm.add_block(block)


def server_delta(items: Items, kind: str, obj: dict[str, Any]) -> None:
    key = _key(obj, kind)
    if items.kinds.get(key) == _SERVER:
        stream_input(items.asm, key, kind, obj)


def part_added(items: Items, obj: dict[str, Any]) -> None:
    """Where a message's second and later parts start in its text block (annotation
    indices count from the start of their part)."""
    where = "response.content_part.added"
    index = optional_field(obj, "content_index", int, where)
    if index:
        key = _key(obj, where)
        block = items.asm.block(key)
        items.offsets[(key, index)] = len(block.text) if isinstance(block, TextContent) else 0


def annotation_added(items: Items, obj: dict[str, Any]) -> None:
    where = "response.output_text.annotation.added"
    annotation = optional_field(obj, "annotation", dict, where)
    if annotation is None:
        return
    key = _key(obj, where)
    index = optional_field(obj, "content_index", int, where) or 0
    items.cited.add(key)
    items.asm.cite(key, citation(annotation, items.offsets.get((key, index), 0)))


def _key(obj: dict[str, Any], where: str) -> Hashable:
    index = optional_field(obj, "output_index", int, where)
    if index is not None:
        return index
    item_id = optional_field(obj, "item_id", str, where)
    return item_id if item_id is not None else 0


def completed_items(items: Items, output: list[Any]) -> None:
    """The terminal response's reasoning items: one re-encrypted since `output_item.done`
    replaces the kept item (its `encrypted_content` is the one to send back). Other items
    keep their `output_item.done` version, the record of the item as it finished."""
    for raw in output:
        if type(raw) is not dict or raw.get("type") != "reasoning":
            continue
        item_id = raw.get("id")
        block = items.by_id.get(item_id) if isinstance(item_id, str) else None
        if not isinstance(block, ThinkingContent):
            continue
        encrypted = raw.get("encrypted_content")
        old = _loads(block.signature)
        if isinstance(encrypted, str) and encrypted and old.get("encrypted_content") != encrypted:
            merged = {**old, **raw}
            block.signature = json.dumps(merged, ensure_ascii=False, separators=(",", ":"))


def _loads(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


_COUNTED = ("web_search", "file_search", "code_execution", "image_generation")


def server_tool_usage(items: Items, response: dict[str, Any], usage: dict[str, Any] | None) -> None:
    """Server-tool calls by kind: the vendor-run calls in the message, replaced by the
    vendor's own counters where it sends them."""
    counts: dict[str, int] = {}
    for b in items.asm.message.content:
        if isinstance(b, ServerToolCall) and b.kind in _COUNTED:
            counts[b.kind] = counts.get(b.kind, 0) + 1
        elif isinstance(b, ServerToolCall) and b.name != "mcp_list_tools" and b.kind == "mcp":
            counts["mcp"] = counts.get("mcp", 0) + 1
    counts.update(server_tool_counts(usage, response.get("tool_usage")))
    if counts:
        items.asm.set_server_tools(counts)


# --- usage ---------------------------------------------------------------------------

# Our usage field <- where the Responses usage object holds it (the dialect's encoder,
# `_responses_encode`, writes usage from the same table).
USAGE_PATHS: dict[str, tuple[str, ...]] = {
    "input": ("input_tokens",),
    "output": ("output_tokens",),
    "cached": ("input_tokens_details", "cached_tokens"),
    "cache_write": ("input_tokens_details", "cache_write_tokens"),
    "reasoning": ("output_tokens_details", "reasoning_tokens"),
}


def _find(usage: dict[str, Any], path: tuple[str, ...]) -> int | None:
    """The count at `path`, or None when absent; a count of another JSON type ends the
    stream `protocol`, naming it, as on every API (never a silent 0)."""
    value: Any = usage
    for part in path:
        value = value.get(part) if type(value) is dict else None
    if value is None or type(value) is int:
        return value
    raise ProtocolError(f"usage.{'.'.join(path)} is {type(value).__name__}, not an integer")


def usage(asm: Assembler, usage: dict[str, Any]) -> None:
    got = {name: _find(usage, path) for name, path in USAGE_PATHS.items()}
    if got["input"] is None and got["output"] is None:
        return
    cached, cache_write = got["cached"] or 0, got["cache_write"] or 0
    asm.set_usage(
        input=max(0, (got["input"] or 0) - cached - cache_write),
        output=got["output"] or 0,
        cache_read=cached,
        cache_write=cache_write,
        reasoning=got["reasoning"] or 0,
    )
