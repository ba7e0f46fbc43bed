"""Blocks back to Responses input items, and `ServerTool`s as tool objects: the way back
of `_responses_builtin` (whose tables it reads). Vendor-run items go back verbatim from
`raw`; caller-run built-in calls as their item and their result as the output item of
that type; approvals as `mcp_approval_response`; files as `input_file`; citations as
`output_text` annotations."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    Citation,
    FileContent,
    ImageContent,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ToolCall,
    ToolResultMessage,
    VendorContent,
)
from stream_core.provider import server_tool_objects

from ._responses_builtin import API, CLIENT_CALLS, INPUT_FIELDS, SERVER_CALLS, TOOL_NAMES

FILE_TYPES = frozenset(
    {
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/html",
        "text/csv",
        "text/xml",
        "application/json",
        "application/xml",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.ms-excel",
        "text/tab-separated-values",
    }
)
"""Media types a `FileContent` may have in a request (Responses `input_file`: PDFs, text
and code, Office documents and spreadsheets, per OpenAI's file-inputs guide)."""


# --- blocks -> input items (request) --------------------------------------------------------


def assistant_block_item(b: Any) -> dict[str, Any] | None:
    """The input item a vendor-run block of an assistant turn goes back as (None: nothing
    to send). Raises for a block that cannot go back to this API."""
    if isinstance(b, ServerToolCall):
        if b.raw is None:
            raise ValueError(
                f"openai-responses: ServerToolCall {b.id!r} ({b.name}) has no vendor item "
                "(`raw`) to send back; a call this API made always has one"
            )
        return b.raw
    if isinstance(b, ServerToolResult):
        # raw None: a reading of the call's own item, which goes back with the call.
        return b.raw
    if isinstance(b, ApprovalRequest):
        if b.raw is not None:
            return b.raw
        return {
            "type": "mcp_approval_request",
            "id": b.id,
            "name": b.name,
            "server_label": b.server or "",
            "arguments": json.dumps(b.arguments, ensure_ascii=False),
        }
    if isinstance(b, VendorContent):
        if b.api != API:
            raise ValueError(
                f"openai-responses cannot take a {b.api} vendor block ({b.vendor_type})"
            )
        return b.data
    if isinstance(b, FileContent):
        if b.call_id:
            # Made by a server call (an image generation): its item, resent with the call,
            # holds the file; resending it as input would duplicate it.
            return None
        raise ValueError(
            "openai-responses: an assistant message cannot carry a FileContent the vendor "
            "did not make (put the file in a user message)"
        )
    raise ValueError(f"openai-responses cannot send a {type(b).__name__} in an assistant turn")


def builtin_call_item(b: ToolCall) -> dict[str, Any]:
    """A caller-run built-in call as its item (the vendor's own, with the call id sent)."""
    assert b.builtin is not None
    if b.raw is not None:
        item = dict(b.raw)
    else:
        _, field, _ = CLIENT_CALLS.get(b.builtin, (None, "arguments", ""))
        value: Any = b.arguments
        if b.builtin == "custom_tool_call":
            value = b.arguments.get("input", "")
            item = {"type": b.builtin, "name": b.name}
        else:
            item = {"type": b.builtin}
        item[field] = value
        item.setdefault("status", "completed")
    item["call_id"] = b.id
    return item


def output_item(call: ToolCall, m: ToolResultMessage) -> dict[str, Any]:
    """The result of a caller-run built-in call as the output item its type requires.

    Convention: the result's text is the output; for a shell call, `details` may be a dict
    with `stdout`, `stderr` and `exit_code` (or `output`: the vendor's chunks verbatim), else
    the text is stdout and the exit code is 1 for an error result, 0 otherwise; for a client
    tool search, `details` holds `{"tools": [...]}` (or the text is that JSON list)."""
    builtin = call.builtin
    text = "\n".join(b.text for b in m.content if isinstance(b, TextContent))
    details = m.details if isinstance(m.details, dict) else {}
    if builtin == "local_shell_call":
        return {"type": "local_shell_call_output", "call_id": m.tool_call_id, "output": text}
    if builtin == "shell_call":
        chunks = details.get("output")
        if not isinstance(chunks, list):
            code = details.get("exit_code")
            chunks = [
                {
                    "stdout": str(details.get("stdout", text)),
                    "stderr": str(details.get("stderr", "")),
                    "outcome": {
                        "type": "exit",
                        "exit_code": code if type(code) is int else (1 if m.is_error else 0),
                    },
                }
            ]
        item: dict[str, Any] = {
            "type": "shell_call_output",
            "call_id": m.tool_call_id,
            "output": chunks,
        }
        action = (call.raw or {}).get("action")
        limit = action.get("max_output_length") if isinstance(action, dict) else None
        if type(limit) is int:
            item["max_output_length"] = limit
        return item
    if builtin == "apply_patch_call":
        return {
            "type": "apply_patch_call_output",
            "call_id": m.tool_call_id,
            "status": "failed" if m.is_error else "completed",
            "output": text,
        }
    if builtin == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": m.tool_call_id, "output": text}
    if builtin == "tool_search_call":
        tools = details.get("tools")
        if not isinstance(tools, list):
            try:
                tools = json.loads(text)
            except ValueError:
                tools = None
        if not isinstance(tools, list):
            raise ValueError(
                f"openai-responses: the result of tool search call {m.tool_call_id!r} needs "
                "the tools it found: details={'tools': [...]} or a JSON list as its text"
            )
        return {
            "type": "tool_search_output",
            "call_id": m.tool_call_id,
            "execution": "client",
            "status": "completed",
            "tools": tools,
        }
    if builtin == "computer_call":
        return _computer_output(m, details)
    raise ValueError(f"openai-responses: no output item is known for a {builtin} call")


def _computer_output(m: ToolResultMessage, details: dict[str, Any]) -> dict[str, Any]:
    """A computer action's result: the screenshot taken after it (an `ImageContent`, or a
    `FileContent` image by URL or file id), with the pending safety checks the harness
    acknowledges in `details={"acknowledged_safety_checks": [...]}` (never implied)."""
    shot: dict[str, Any] = {"type": "computer_screenshot"}
    for b in m.content:
        if isinstance(b, ImageContent):
            shot["image_url"] = f"data:{b.mime_type};base64,{b.data}"
        elif isinstance(b, FileContent) and (b.file_id or b.url or b.data):
            if b.file_id:
                shot["file_id"] = b.file_id
            else:
                shot["image_url"] = b.url or f"data:{b.mime_type};base64,{b.data}"
        else:
            continue
        break
    else:
        raise ValueError(
            f"openai-responses: the result of computer call {m.tool_call_id!r} needs the "
            "screenshot taken after the action (an ImageContent)"
        )
    item: dict[str, Any] = {"type": "computer_call_output", "call_id": m.tool_call_id}
    item["output"] = shot
    acknowledged = details.get("acknowledged_safety_checks")
    if isinstance(acknowledged, list) and acknowledged:
        item["acknowledged_safety_checks"] = acknowledged
    return item


def user_item(b: Any) -> dict[str, Any] | None:
    """A user-message block that goes as an item of its own (None: a content part)."""
    if isinstance(b, ApprovalResponse):
        item: dict[str, Any] = {
            "type": "mcp_approval_response",
            "approval_request_id": b.request_id,
            "approve": b.approve,
        }
        if b.reason is not None:
            item["reason"] = b.reason
        return item
    if isinstance(b, VendorContent):
        if b.api != API:
            raise ValueError(
                f"openai-responses cannot take a {b.api} vendor block ({b.vendor_type})"
            )
        return b.data
    return None


def file_part(b: FileContent) -> dict[str, Any]:
    """A file in a user message or tool result as an `input_file` part."""
    part: dict[str, Any] = {"type": "input_file"}
    if b.file_id:
        part["file_id"] = b.file_id
    elif b.data is not None:
        part["filename"] = b.name or "file"
        part["file_data"] = f"data:{b.mime_type};base64,{b.data}"
    else:
        part["file_url"] = b.url
    return part


def annotation(c: Citation) -> dict[str, Any]:
    """A citation as the `output_text` annotation it came as (spans from the citation)."""
    if c.raw is not None:
        out = dict(c.raw)
    elif c.url:
        out = {"type": "url_citation", "url": c.url, "title": c.title or ""}
    else:
        out = {"type": "file_citation", "file_id": c.file_id or "", "filename": c.filename or ""}
    if "index" in out and c.start is not None:
        out["index"] = c.start
    elif c.start is not None and c.end is not None:
        out["start_index"], out["end_index"] = c.start, c.end
    return out


_ANNOTATION_FIELDS = {
    "url_citation": ("url", "title", "start", "end"),
    "file_citation": ("file_id", "filename", "start", "end"),
}
"""What each annotation a scripted citation is written as can say (a file citation's
`index` is a point: `start == end`)."""


def script_annotation(c: Citation) -> dict[str, Any]:
    """`annotation` for `vendor_bytes`: the annotation the translator reads back as `c`,
    field for field. Raises (naming the field) for what an annotation has no field for:
    `cited_text` and `document_index` (Responses annotations carry neither), a url
    citation's file, a file citation's title or span (it has one `index`)."""
    if c.raw is not None:
        return annotation(c)
    note = "url_citation" if c.url else "file_citation"
    said = _ANNOTATION_FIELDS[note]
    for name, value in c.model_dump(exclude={"raw"}).items():
        if value is not None and name not in said:
            raise ValueError(
                f"vendor_bytes: {API} has no field for a citation's `{name}` (a {note} "
                f"annotation says {', '.join(said)}); leave it unset or give `raw`"
            )
    if (c.start is None) != (c.end is None) or (note == "file_citation" and c.start != c.end):
        what = "a point (start == end)" if note == "file_citation" else "both ends or neither"
        raise ValueError(f"vendor_bytes: {API} cites with a {note} span of {what}")
    out = annotation(c)
    for name in ("title", "file_id", "filename"):  # written "" when unset: read back ""
        if getattr(c, name) is None:
            out.pop(name, None)
    return out


# --- ServerTool -> tool objects (request) ---------------------------------------------------


def _web_search(t: ServerTool) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "web_search"}
    if t.allowed_domains:
        tool["filters"] = {"allowed_domains": list(t.allowed_domains)}
    if t.blocked_domains:
        raise ValueError(
            "openai-responses web_search takes allowed_domains only, not blocked_domains"
        )
    if t.user_location is not None:
        tool["user_location"] = {"type": "approximate", **t.user_location.model_dump()}
    return tool


def _file_search(t: ServerTool) -> dict[str, Any]:
    ids = t.options.get("vector_store_ids")
    if not ids:
        raise ValueError(
            "openai-responses file_search needs the vector stores to search: "
            "ServerTool(kind='file_search', options={'vector_store_ids': [...]})"
        )
    tool: dict[str, Any] = {"type": "file_search", "vector_store_ids": ids}
    if t.max_uses is not None:
        tool["max_num_results"] = t.max_uses
    return tool


def _code_interpreter(t: ServerTool) -> dict[str, Any]:
    return {"type": "code_interpreter", "container": {"type": "auto"}}


def _image_generation(t: ServerTool) -> dict[str, Any]:
    return {"type": "image_generation"}


SERVER_TOOLS: dict[str, Callable[[ServerTool], dict[str, Any]]] = {
    "web_search": _web_search,
    "file_search": _file_search,
    "code_execution": _code_interpreter,
    "image_generation": _image_generation,
}
"""`ServerTool.kind` -> the Responses tool object (`WireAPI.server_tools`)."""

_INCLUDES = {
    "web_search": "web_search_call.action.sources",
    "file_search": "file_search_call.results",
    "code_interpreter": "code_interpreter_call.outputs",
}
"""Tool type -> the `include` entry that makes its item carry its results."""


def tool_objects(tools: list[ServerTool]) -> tuple[list[dict[str, Any]], list[str]]:
    """The tool objects for `tools`, and the `include` entries their results need."""
    out: list[dict[str, Any]] = []
    include: list[str] = []
    for obj in server_tool_objects(tools, SERVER_TOOLS):
        out.append(obj)
        extra = _INCLUDES.get(str(obj.get("type")))
        if extra and extra not in include:
            include.append(extra)
    return out, include


# --- blocks -> the items a server streams (`vendor_bytes`) ----------------------------------

_WRITTEN = ("web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call")
_KIND_ITEMS = {SERVER_CALLS[t]: t for t in (*_WRITTEN, "mcp_call")}
"""A scripted call without `raw`: the item type its kind is written as (`SERVER_CALLS`
read backwards, for the item types written here)."""


def encode_block(block: Any, previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """The output item a scripted block is streamed as; None when the block is a reading
    of the previous item (a `ServerToolResult` with `raw=None`, a generated image), written
    into `previous` instead. Raises for a block the Responses API cannot express."""
    if isinstance(block, ServerToolCall):
        # A copy: a reading after it may be written into it.
        return copy.deepcopy(block.raw) if block.raw is not None else _call_item(block)
    if isinstance(block, ServerToolResult) and block.raw is not None:
        return block.raw
    if isinstance(block, ServerToolResult):
        _fold_result(block, previous)
        return None
    if isinstance(block, FileContent):
        if previous is None or previous.get("type") != "image_generation_call" or not block.data:
            raise ValueError(
                "vendor_bytes: openai-responses streams a file only as the image of the "
                "image_generation_call before it (a FileContent with data after that call)"
            )
        previous["result"] = block.data
        previous["output_format"] = (block.mime_type or "image/png").split("/")[-1]
        return None
    item = assistant_block_item(block)
    return item if item is not None else None


def _call_item(call: ServerToolCall) -> dict[str, Any]:
    itype = _KIND_ITEMS.get(call.kind or "")
    # The item type as the name is taken too (earlier scripts spelled it so): it comes
    # back as the tool's name, the one rename left (ALIASED in the review tests).
    if itype is None or (itype != "mcp_call" and call.name not in (itype, TOOL_NAMES.get(itype))):
        raise ValueError(
            f"vendor_bytes: openai-responses writes a server call without `raw` by its kind "
            f"({', '.join(f'{k} as {v}' for k, v in _KIND_ITEMS.items())}); "
            f"{call.name!r} (kind {call.kind!r}) needs its vendor item in `raw` (the item "
            f"names the call by its tool: {', '.join(map(repr, TOOL_NAMES.values()))})"
        )
    if call.caller is not None:
        raise ValueError(f"vendor_bytes: {API} has no `caller` on a {itype} item; give `raw`")
    given = _said_input(call, itype)
    item: dict[str, Any] = {"type": itype, "id": call.id, "status": "completed"}
    if itype == "web_search_call":
        item["action"] = given
    elif itype == "file_search_call":
        item.update(given, results=None)
    elif itype == "code_interpreter_call":
        item.update(given, outputs=None)
    elif itype == "image_generation_call":
        item.update(given, result=None)
    else:
        item.update(name=call.name, arguments=json.dumps(given), server_label="")
        item.update(output=None, error=None)
    return item


def _fold_result(result: ServerToolResult, call: dict[str, Any] | None) -> None:
    itype = call.get("type") if call is not None else None
    if call is None or itype not in ("web_search_call", "file_search_call", "code_interpreter_call",
                                     "mcp_call", "mcp_list_tools"):  # fmt: skip
        raise ValueError(
            "vendor_bytes: openai-responses carries a ServerToolResult without `raw` inside "
            "the call item right before it (web search, file search, code, MCP)"
        )
    assert call is not None
    held = {
        "web_search_call": (call.get("action") or {}).get("sources"),
        "file_search_call": call.get("results"),
        "code_interpreter_call": call.get("outputs"),
        "mcp_call": call.get("output") if call.get("error") is None else call.get("error"),
        "mcp_list_tools": call.get("tools"),
    }[itype]
    if held:
        return  # the vendor's item already holds it (a recorded call, sent back as it was)
    _check_reading(result, call, itype)
    if itype == "web_search_call":
        action = call.setdefault("action", {"type": "search"})
        action["sources"] = [
            {"type": "url", **s.model_dump(include={"url", "title"})} for s in result.sources
        ]
    elif itype == "file_search_call":
        call["results"] = [s.model_dump() for s in result.sources]
    elif itype == "code_interpreter_call":
        logs = [{"type": "logs", "logs": result.text}] if result.text else []
        images = [{"type": "image", "url": s.url} for s in result.sources]
        call["outputs"] = logs + images
    elif itype == "mcp_call":
        call["error" if result.is_error else "output"] = result.text
    else:
        call["tools"] = [{"name": n} for n in result.text.split(", ") if n]


def _said_input(call: ServerToolCall, itype: str) -> dict[str, Any]:
    """A scripted call's input as the item fields the translator reads it from: a search's
    `action` object (without `sources`, its result), else the item's own input fields
    (`_INPUT_FIELDS`); MCP arguments any object. Raises for input the item cannot hold."""
    given = call.input
    fields = INPUT_FIELDS.get(itype, ())
    if not isinstance(given, dict):
        raise ValueError(f"vendor_bytes: {API} holds a {itype}'s input as an object")
    if itype == "mcp_call":
        return given
    if itype == "web_search_call":
        if "sources" in given:
            raise ValueError(
                f"vendor_bytes: {API} reads a web search's `action.sources` as its result: "
                "script the sources on a ServerToolResult after the call"
            )
        return dict(given)
    extra = [k for k in given if k not in fields or given[k] is None]
    if extra or (itype == "code_interpreter_call" and not isinstance(given.get("code", ""), str)):
        raise ValueError(
            f"vendor_bytes: {API} has no field for the input {extra or ['code']} of a "
            f"{itype} (it holds {', '.join(fields)}, not null)"
        )
    return dict(given)


_READINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # action.sources: {type: url, url}; OpenAI sends no title, servers that speak the API
    # (xAI, OpenRouter) add one, which the translator reads
    "web_search_call": ((), ("url", "title")),
    "file_search_call": ((), ("file_id", "filename", "score", "text")),  # results[]
    "code_interpreter_call": (("text",), ("url",)),  # outputs: logs, images by url
    "mcp_call": (("text", "is_error"), ()),  # output or error
    "mcp_list_tools": (("text", "is_error"), ()),  # tools by name, or error
}
"""What a call item can hold of a scripted reading: (result fields, fields of each source)."""


def _check_reading(result: ServerToolResult, call: dict[str, Any], itype: str) -> None:
    """Raise, naming the field, for what `call`'s item has no field for, so the translator's
    reading of the item is the scripted result field for field."""
    fields, source_fields = _READINGS[itype]
    where = f"vendor_bytes: {API} carries a {itype}'s result in its item"
    name = call.get("name") if itype == "mcp_call" else TOOL_NAMES.get(itype, itype)
    said = (call.get("id"), name, SERVER_CALLS.get(itype))
    if (result.call_id, result.name.replace(itype, str(name)), result.kind) != said:
        raise ValueError(f"{where}: its call_id, name and kind are the call's {said}")
    for field, unset in (("text", ""), ("is_error", False), ("exit_code", None)):
        if getattr(result, field) != unset and field not in fields:
            raise ValueError(f"{where}, which has no field for `{field}`; give `raw`")
    if result.sources and not source_fields:
        raise ValueError(f"{where}, which has no field for `sources`; give `raw`")
    for source in result.sources:
        for field, value in source.model_dump().items():
            if value is not None and field not in source_fields:
                raise ValueError(f"{where}: a source says {', '.join(source_fields)}, no `{field}`")
    empty = not result.sources and (itype != "code_interpreter_call" or not result.text)
    if empty and itype in ("web_search_call", "file_search_call", "code_interpreter_call"):
        raise ValueError(f"{where}: one with nothing in it (no sources) is none")
