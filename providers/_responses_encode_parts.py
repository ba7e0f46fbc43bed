"""Pieces of the Responses encoder (`_responses_encode`): the usage object where the
translator reads it (`USAGE_PATHS`, server tools by `USAGE_KINDS` read backwards), another
API's blocks as this API can show them, and a finished message as the events a stream of
it would have had (what the non-streamed answer and `vendor_bytes` are written from)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from stream_core import (
    ApprovalRequest,
    AssistantMessage,
    AssistantStreamEvent,
    BlockEnd,
    BlockStart,
    CitationAdded,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ServerToolCall,
    ServerToolResult,
    Source,
    TextContent,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingContent,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    VendorContent,
)

from ._responses_builtin import SERVER_CALLS, TOOL_NAMES, USAGE_KINDS
from ._responses_builtin_out import _READINGS
from ._responses_items import USAGE_PATHS
from .openai_responses import API

__all__ = ["arguments", "events_of", "foreign", "shown_call", "usage"]

_OPENAI_TOOL_COUNTERS: dict[str, str] = {}
_OTHER_TOOL_COUNTERS: dict[str, str] = {}
for _name, _kind in USAGE_KINDS.items():
    table = _OTHER_TOOL_COUNTERS if _name.endswith("_calls") else _OPENAI_TOOL_COUNTERS
    table.setdefault(_kind, _name)
"""Server-tool kind -> OpenAI's `tool_usage` name, else xAI's `usage` counter (the
translator's `USAGE_KINDS` read backwards; any other kind as `<kind>_calls`)."""


def arguments(block: ToolCall) -> str:
    return json.dumps(block.arguments, ensure_ascii=False)


_ITEM_TYPES: dict[str, str] = {}
for _itype, _called in SERVER_CALLS.items():
    if _called is not None and _itype in TOOL_NAMES:
        _ITEM_TYPES.setdefault(_called, _itype)
"""Server-tool kind -> the item type a call of it is (`SERVER_CALLS` read backwards)."""


def foreign(block: Any) -> Any:
    """Another API's block as this API can show it (None: nothing to show; the carrier
    keeps it for the upstream). Its vendor record (`raw`) is that API's, not an item; a
    server call is named by the tool its item type says (Gemini's `google_search` is a
    `web_search_call`), and its result keeps what that item holds (`_READINGS`: a web
    search's sources by url and title)."""
    if isinstance(block, VendorContent):
        return block if block.api == API else None
    if isinstance(block, ApprovalRequest):
        return block.model_copy(update={"raw": None})
    if not isinstance(block, (ServerToolCall, ServerToolResult)):
        return block
    update: dict[str, Any] = {"raw": None}
    itype = _ITEM_TYPES.get(block.kind or "")
    if itype is not None:
        update["name"] = TOOL_NAMES[itype]
    if isinstance(block, ServerToolResult):
        fields, said = _READINGS.get(itype or "", ((), ()))
        update.update(
            text=block.text if "text" in fields else "",
            is_error=block.is_error if "is_error" in fields else False,
            exit_code=None,
            sources=[Source(**{f: getattr(s, f) for f in said}) for s in block.sources]
            if said
            else [],
        )
    return block.model_copy(update=update)


def shown_call(item: dict[str, Any]) -> dict[str, Any]:
    """A server call of another vendor: a web search's action says its type (`search`)."""
    action = item.get("action")
    if item.get("type") == "web_search_call" and isinstance(action, dict) and "type" not in action:
        item["action"] = {"type": "search", **action}
    return item


def usage(message: AssistantMessage, final: dict[str, Any]) -> dict[str, Any]:
    """The usage where the translator reads it (`USAGE_PATHS`): `input_tokens` counts the
    cached and cache-written tokens, as OpenAI's does; server tools by OpenAI's or xAI's
    counters (`tool_usage` goes on the response)."""
    u = message.usage
    counts = {
        "input": u.input + u.cache_read + u.cache_write,
        "output": u.output,
        "cached": u.cache_read,
        "cache_write": u.cache_write,
        "reasoning": u.reasoning,
    }
    usage: dict[str, Any] = {}
    for name, path in USAGE_PATHS.items():
        if name == "cache_write" and not counts[name]:
            continue  # OpenAI sends none; a proxy that writes caches does
        at = usage
        for part in path[:-1]:
            at = at.setdefault(part, {})
        at[path[-1]] = counts[name]
    usage["total_tokens"] = counts["input"] + counts["output"]
    for kind, n in (u.server_tools or {}).items():
        said = _OPENAI_TOOL_COUNTERS.get(kind)
        if said is not None:
            final.setdefault("tool_usage", {})[said] = {"num_requests": n}
        else:
            other = _OTHER_TOOL_COUNTERS.get(kind, f"{kind}_calls")
            usage.setdefault("server_side_tool_usage_details", {})[other] = n
    return usage


# --- a finished message as events -----------------------------------------------------------


def events_of(message: AssistantMessage) -> Iterator[AssistantStreamEvent]:
    """The events a stream of `message` would have had, block by block (each block's
    text in one delta): what the non-streamed answer and `vendor_bytes` are written from."""
    yield MessageStart(message=message)
    for i, b in enumerate(message.content):
        for delta in _deltas(i, b):
            yield MessageUpdate(message=message, delta=delta)
    yield MessageEnd(message=message)


def _deltas(i: int, b: Any) -> list[Any]:
    if isinstance(b, TextContent):
        out: list[Any] = [TextStart(content_index=i)]
        if b.text:
            out.append(TextDelta(content_index=i, delta=b.text))
        out += [CitationAdded(content_index=i, citation=c) for c in b.citations or ()]
        return [*out, TextEnd(content_index=i)]
    if isinstance(b, ThinkingContent):
        out = [ThinkingStart(content_index=i)]
        if b.thinking:
            out.append(ThinkingDelta(content_index=i, delta=b.thinking))
        return [*out, ThinkingEnd(content_index=i)]
    if isinstance(b, ToolCall):
        out = [ToolCallStart(content_index=i)]
        text = b.partial_json if b.truncated else arguments(b)
        if text:
            out.append(ToolCallDelta(content_index=i, delta=text))
        return [*out, ToolCallEnd(content_index=i)]
    kind = str(getattr(b, "type", "vendor"))
    return [BlockStart(content_index=i, kind=kind), BlockEnd(content_index=i)]
