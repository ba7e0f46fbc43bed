"""The modern-feature fields of a recording's `expect`, checked against a replayed message.

Recordings of server-side tools, caller-run built-in items, citations and grounding,
generated files and encrypted reasoning (fixtures/INDEX.md, "Modern-feature fields
(kinds)") carry fields an independent reader computed from the body. `check_modern`
checks that the message a provider made from that body keeps each of them, in our blocks:

- `server_tools`: Anthropic `{id, name, input, caller?, result}` -> a `ServerToolCall` of that
  id, name, input and caller, and a `ServerToolResult` for it whose `raw` is the vendor's
  result block; Responses `{item_id, item}` -> a block whose `raw` (a `VendorContent`'s
  `data`) is the item; Gemini `{call, result}` -> a `ServerToolCall` / `ServerToolResult`
  holding the part's `toolCall` / `toolResponse`.
- `client_builtin_calls` -> a `ToolCall` of that id with `builtin` and `raw`; stop `tool_use`.
- `approval_requests` -> an `ApprovalRequest` (id, name, server, arguments).
- `citations` -> a `Citation` holding the vendor's record (`raw`) on the text it covers;
  chat `{marker, url}` -> a citation of that URL on a text holding the marker.
- `grounding` -> per support, a citation whose span of its block's text is the support's.
- `files` -> a `FileContent` with the file id, or with bytes of that sha256 and media type.
- `reasoning_opaque` -> every signature / encrypted payload somewhere in the message.
- `server_tool_usage` -> `usage.server_tools` counts where a counter maps to a kind.
- `container` -> `message.container` of that id.

Strings longer than 4096 characters in `expect` are `{"sha256", "length", "prefix"}`
stand-ins: a value matches one when the sha256 of its UTF-8 text is the same.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from stream_core import (
    ApprovalRequest,
    AssistantMessage,
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ToolCall,
    VendorContent,
)

__all__ = ["MODERN_FIELDS", "check_modern", "has_modern", "same"]

MODERN_FIELDS = (
    "server_tools",
    "client_builtin_calls",
    "approval_requests",
    "citations",
    "grounding",
    "files",
    "reasoning_opaque",
    "server_tool_usage",
    "container",
)
"""The `expect` fields `check_modern` checks (others, such as `blocks`, are not)."""

_STAND_IN = frozenset({"sha256", "length", "prefix"})


def has_modern(expect: dict[str, Any]) -> bool:
    """Whether a recording's `expect` names any field `check_modern` checks."""
    return any(name in expect for name in MODERN_FIELDS)


def check_modern(message: AssistantMessage, expect: dict[str, Any]) -> None:
    """Assert that `message` keeps every modern-feature field of `expect`; the error lists
    each one missed, naming the recording's field and what the message holds instead."""
    problems: list[str] = []
    for name in MODERN_FIELDS:
        if name in expect and expect[name] is not None:
            problems += _CHECKS[name](message, expect[name])
    if problems:
        raise AssertionError("modern fields not kept:\n- " + "\n- ".join(problems))


# --- comparing vendor values ---------------------------------------------------------------


def _is_stand_in(value: Any) -> bool:
    return isinstance(value, dict) and value.keys() == _STAND_IN


def same(got: Any, want: Any, path: str = "") -> str | None:
    """None when `got` equals `want` (stand-ins compared by sha256), else where they first
    differ and how."""
    if _is_stand_in(want):
        if isinstance(got, str) and hashlib.sha256(got.encode()).hexdigest() == want["sha256"]:
            return None
        shown = f"{len(got)} chars" if isinstance(got, str) else _short(got)
        return f"{path or 'value'}: {shown}, expected a string of {want['length']} chars "
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path or 'value'}: {_short(got)}, expected an object"
        missing = want.keys() - got.keys()
        extra = got.keys() - want.keys()
        if missing or extra:
            return f"{path or 'value'}: keys missing {sorted(missing)}, extra {sorted(extra)}"
        for key, value in want.items():
            found = same(got[key], value, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{path or 'value'}: {_short(got)}, expected a list of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            found = same(g, w, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if got != want or isinstance(got, bool) != isinstance(want, bool):
        return f"{path or 'value'}: {_short(got)}, expected {_short(want)}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def _raw(block: Any) -> Any:
    """The vendor's own record a block keeps (`raw`, a `VendorContent`'s `data`)."""
    if isinstance(block, VendorContent):
        return block.data
    return getattr(block, "raw", None)


def _of(message: AssistantMessage, cls: type[Any]) -> list[Any]:
    return [b for b in message.content if isinstance(b, cls)]


def _cited(message: AssistantMessage) -> Iterator[tuple[TextContent, Citation]]:
    for block in message.content:
        if isinstance(block, TextContent):
            for citation in block.citations or ():
                yield block, citation


def _span(block: TextContent, c: Citation) -> str | None:
    if c.start is None and c.end is None:
        return None
    return block.text[c.start : c.end]


# --- the fields ------------------------------------------------------------------------------


def _server_tools(message: AssistantMessage, entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for i, entry in enumerate(entries):
        where = f"expect.server_tools[{i}]"
        if "item" in entry:
            out += _responses_item(message, entry, where)
        elif "tool_type" in entry or "call" in entry:
            out += _gemini_tool(message, entry, where)
        else:
            out += _anthropic_tool(message, entry, where)
    return out


def _anthropic_tool(message: AssistantMessage, entry: dict[str, Any], where: str) -> list[str]:
    out: list[str] = []
    call_id = entry.get("id")
    where = f"{where} ({entry.get('name') or 'result'} {call_id})"
    if entry.get("call_in_this_message", True):
        calls = [b for b in _of(message, ServerToolCall) if b.id == call_id]
        if not calls:
            ids = [b.id for b in _of(message, ServerToolCall)]
            out.append(f"{where}: no ServerToolCall with this id (found ids {ids})")
        else:
            call = calls[0]
            if call.name != entry.get("name"):
                out.append(f"{where}: name {call.name!r}, expected {entry.get('name')!r}")
            diff = same(call.input, entry.get("input"), "input")
            if diff:
                out.append(f"{where}: {diff}")
            if "caller" in entry and call.caller != entry["caller"]:
                out.append(f"{where}: caller {call.caller!r}, expected {entry['caller']!r}")
    result = entry.get("result")
    if result is None or entry.get("result_in_this_message") is False:
        return out
    results = [b for b in _of(message, ServerToolResult) if b.call_id == call_id]
    if not results:
        ids = [b.call_id for b in _of(message, ServerToolResult)]
        return [*out, f"{where}: no ServerToolResult for this call (found call_ids {ids})"]
    raw = results[0].raw
    if not isinstance(raw, dict):
        return [*out, f"{where}: its ServerToolResult keeps no raw vendor block ({raw!r})"]
    if raw.get("type") != result.get("vendor_type"):
        out.append(
            f"{where}: result raw type {raw.get('type')!r}, expected {result['vendor_type']!r}"
        )
    diff = same(raw.get("content"), result.get("content"), "result.content")
    if diff:
        out.append(f"{where}: {diff}")
    return out


def _responses_item(message: AssistantMessage, entry: dict[str, Any], where: str) -> list[str]:
    item_id = entry.get("item_id")
    where = f"{where} ({entry.get('vendor_type')} {item_id})"
    holders = [
        b
        for b in message.content
        if isinstance(_raw(b), dict)
        and item_id is not None
        and item_id in (_raw(b).get("id"), getattr(b, "id", None), getattr(b, "call_id", None))
    ]
    if not holders:
        kept = [f"{b.type}:{(_raw(b) or {}).get('id')}" for b in message.content if _raw(b)]
        return [f"{where}: no block keeps this item (blocks with raw: {kept})"]
    diffs = [same(_raw(b), entry["item"], "item") for b in holders]
    if all(diffs):
        return [f"{where}: raw differs from the item: {diffs[0]}"]
    return []


def _gemini_tool(message: AssistantMessage, entry: dict[str, Any], where: str) -> list[str]:
    out: list[str] = []
    where = f"{where} ({entry.get('tool_type')} {entry.get('id')})"
    call = entry.get("call")
    if call is not None and not any(_holds(b.raw, call) for b in _of(message, ServerToolCall)):
        raws = [_short(b.raw) for b in _of(message, ServerToolCall)]
        out.append(f"{where}: no ServerToolCall keeps the toolCall {_short(call)} (raw: {raws})")
    result = entry.get("result")
    if isinstance(result, dict):
        value = result.get("value", result)
        if not any(_holds(b.raw, value) for b in _of(message, ServerToolResult)):
            raws = [_short(b.raw) for b in _of(message, ServerToolResult)]
            out.append(
                f"{where}: no ServerToolResult keeps the toolResponse {_short(value)} (raw: {raws})"
            )
    return out


def _holds(raw: Any, want: Any) -> bool:
    """`raw` is `want`, or the part holding it (`{"toolCall": want, "thoughtSignature": ...}`)."""
    if not isinstance(raw, dict):
        return False
    return same(raw, want) is None or any(same(v, want) is None for v in raw.values())


def _client_builtin_calls(message: AssistantMessage, entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    calls = _of(message, ToolCall)
    for i, entry in enumerate(entries):
        where = (
            f"expect.client_builtin_calls[{i}] ({entry.get('vendor_type')} {entry.get('call_id')})"
        )
        found = [c for c in calls if c.id == entry.get("call_id")]
        if not found:
            out.append(f"{where}: no ToolCall with this id (found {[c.id for c in calls]})")
            continue
        call = found[0]
        if call.builtin != entry.get("vendor_type"):
            out.append(f"{where}: builtin {call.builtin!r}, expected {entry.get('vendor_type')!r}")
        raw_id = call.raw.get("id") if isinstance(call.raw, dict) else None
        if raw_id != entry.get("item_id"):
            out.append(f"{where}: raw id {raw_id!r}, expected {entry.get('item_id')!r}")
    if entries and message.stop_reason != "tool_use":
        out.append(
            f"expect.client_builtin_calls: stop_reason {message.stop_reason!r}, not tool_use"
        )
    return out


def _approval_requests(message: AssistantMessage, entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    asked = _of(message, ApprovalRequest)
    for i, entry in enumerate(entries):
        where = f"expect.approval_requests[{i}] ({entry.get('id')})"
        found = [a for a in asked if a.id == entry.get("id")]
        if not found:
            out.append(f"{where}: no ApprovalRequest with this id (found {[a.id for a in asked]})")
            continue
        a = found[0]
        for ours, theirs in (("name", "name"), ("server", "server_label")):
            if getattr(a, ours) != entry.get(theirs):
                out.append(f"{where}: {ours} {getattr(a, ours)!r}, expected {entry.get(theirs)!r}")
        diff = same(a.arguments, entry.get("arguments"), "arguments")
        if diff:
            out.append(f"{where}: {diff}")
    return out


def _citations(message: AssistantMessage, entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    cited = list(_cited(message))
    for i, entry in enumerate(entries):
        where = f"expect.citations[{i}]"
        if "marker" in entry:
            # Top-level chat `citations[]` list every source, cited in the text or not: a
            # citation of each URL, on the text holding its marker where one does.
            url, marker = entry.get("url"), entry.get("marker")
            marked = any(marker in b.text for b in _of(message, TextContent))
            if not any(c.url == url and (not marked or marker in b.text) for b, c in cited):
                urls = [c.url for _, c in cited]
                on = f" on a text holding {marker}" if marked else ""
                out.append(
                    f"{where} ({marker} {url}): no citation of this URL{on} (citations: {urls})"
                )
            continue
        record = entry.get("citation", entry.get("annotation"))
        holders = [(b, c) for b, c in cited if same(c.raw, record) is None]
        label = f"{where} ({(record or {}).get('type')})"
        if not holders:
            out.append(
                f"{label}: no Citation keeps the vendor record {_short(record)} as raw "
                f"({len(cited)} citations: {[_short(c.raw, 40) for _, c in cited][:5]})"
            )
            continue
        if "citation" in entry and "span_text" in entry:
            text = entry["span_text"]
            if not any(b.text == text or _span(b, c) == text for b, c in holders):
                out.append(
                    f"{label}: the citation is on {_short(holders[0][0].text)}, "
                    f"expected the text {_short(text)}"
                )
        elif "span_text" in entry:
            text = entry["span_text"]
            if not any(_span(b, c) == text for b, c in holders):
                spans = [(c.start, c.end, _span(b, c)) for b, c in holders]
                out.append(f"{label}: span {_short(spans)}, expected {_short(text)}")
        elif "text_before_index" in entry:
            text = entry["text_before_index"]
            if not any(text in b.text for b, _ in holders):
                out.append(
                    f"{label}: its text {_short(holders[0][0].text)} does not hold {_short(text)}"
                )
    return out


def _grounding(message: AssistantMessage, grounding: dict[str, Any]) -> list[str]:
    out: list[str] = []
    cited = list(_cited(message))
    for i, support in enumerate(grounding.get("supports") or ()):
        text = support.get("text")
        if text is None:
            continue
        if not any(_span(b, c) == text for b, c in cited):
            spans = [(c.start, c.end) for _, c in cited]
            out.append(
                f"expect.grounding.supports[{i}]: no citation spans {_short(text)} "
                f"(citation spans: {spans})"
            )
    return out


def _files(message: AssistantMessage, entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    files = _of(message, FileContent)
    for i, entry in enumerate(entries):
        where = f"expect.files[{i}] ({entry.get('vendor_type')})"
        if entry.get("file_id"):
            if not any(f.file_id == entry["file_id"] for f in files):
                ids = [f.file_id for f in files]
                out.append(f"{where}: no FileContent with file_id {entry['file_id']} (found {ids})")
            continue
        if not entry.get("sha256"):
            continue
        found = [f for f in files if _sha256(f.data) == entry["sha256"]]
        if not found:
            kinds = [(f.mime_type, len(f.data or "")) for f in files]
            out.append(
                f"{where}: no FileContent holds bytes of sha256 {entry['sha256'][:12]}... "
                f"(files: {kinds})"
            )
        elif entry.get("media_type") and found[0].mime_type != entry["media_type"]:
            out.append(
                f"{where}: mime_type {found[0].mime_type!r}, expected {entry['media_type']!r}"
            )
    return out


def _sha256(data: str | None) -> str | None:
    if not data:
        return None
    try:
        return hashlib.sha256(base64.b64decode(data, validate=True)).hexdigest()
    except (binascii.Error, ValueError):
        return None


_OPAQUE_KEYS = ("signature", "thoughtSignature", "data")
"""The opaque strings a reasoning entry names (a `redacted_thinking` block's `data`)."""


def _reasoning_opaque(message: AssistantMessage, entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    dump = message.model_dump(mode="json")
    strings = set(_strings(dump))
    whole = json.dumps(dump, ensure_ascii=False)
    hashes: set[str] | None = None

    def kept(value: Any) -> bool:
        nonlocal hashes
        if _is_stand_in(value):
            if hashes is None:
                hashes = {hashlib.sha256(s.encode()).hexdigest() for s in strings}
            return value["sha256"] in hashes
        return isinstance(value, str) and (value in strings or value in whole)

    for i, entry in enumerate(entries):
        name = entry.get("item_id") or entry.get("vendor_type") or entry.get("part")
        where = f"expect.reasoning_opaque[{i}] ({name})"
        for key in _OPAQUE_KEYS:
            if entry.get(key) and not kept(entry[key]):
                out.append(
                    f"{where}: its {key} ({_short(entry[key], 40)}) is nowhere in the message"
                )
        tokens = [
            entry.get(k) for k in ("encrypted_content", "encrypted_content_in_response_completed")
        ]
        tokens = [t for t in tokens if t]
        if tokens and not any(kept(t) for t in tokens):
            out.append(
                f"{where}: its encrypted_content ({_short(tokens[0], 40)}) is nowhere in "
                "the message"
            )
    return out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _server_tool_usage(message: AssistantMessage, usage: dict[str, Any]) -> list[str]:
    wanted: dict[str, int] = {}
    for key, n in usage.items():
        # Anthropic: `web_search_requests`, `web_fetch_requests`, ...
        if key.endswith("_requests") and isinstance(n, int) and n > 0:
            wanted[key.removesuffix("_requests")] = n
    tool_usage = usage.get("tool_usage")
    if isinstance(tool_usage, dict):
        # Responses `tool_usage`: `{"web_search": {"num_requests": n}, ...}`.
        for kind, counters in tool_usage.items():
            n = counters.get("num_requests") if isinstance(counters, dict) else None
            if isinstance(n, int) and n > 0:
                wanted[kind] = n
    got = message.usage.server_tools or {}
    out = [
        f"expect.server_tool_usage: usage.server_tools[{kind!r}] = {got.get(kind)}, expected {n}"
        f" (server_tools: {got})"
        for kind, n in wanted.items()
        if got.get(kind) != n
    ]
    used = usage.get("num_server_side_tools_used")  # xAI: a total, no kinds
    if isinstance(used, int) and used > 0 and not got:
        out.append(f"expect.server_tool_usage: {used} server tool calls, usage.server_tools empty")
    return out


def _container(message: AssistantMessage, container: dict[str, Any]) -> list[str]:
    got = (message.container or {}).get("id")
    if got != container.get("id"):
        return [f"expect.container: message.container id {got!r}, expected {container.get('id')!r}"]
    return []


_CHECKS: dict[str, Callable[[AssistantMessage, Any], list[str]]] = {
    "server_tools": _server_tools,
    "client_builtin_calls": _client_builtin_calls,
    "approval_requests": _approval_requests,
    "citations": _citations,
    "grounding": _grounding,
    "files": _files,
    "reasoning_opaque": _reasoning_opaque,
    "server_tool_usage": _server_tool_usage,
    "container": _container,
}
