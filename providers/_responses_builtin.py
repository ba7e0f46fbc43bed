"""The Responses output items beyond messages, reasoning and function calls, as blocks, and
back: one table read by the translator (vendor item -> block), the request builder (block
-> input item) and `vendor_bytes` (block -> the events a server streams).

- Items the vendor RAN (`web_search_call`, `file_search_call`, `code_interpreter_call`,
  `image_generation_call`, `mcp_list_tools`, `mcp_call`, `tool_search_call` with
  `execution: server`, `shell_call` with a hosted `environment`, `program`) become a
  `ServerToolCall` whose `raw` is the finished item verbatim, followed, when the item
  carries its own result (search sources, file chunks, MCP output, code logs, listed
  tools), by a `ServerToolResult` with `raw=None`: a reading of the same item, which goes
  back to the vendor through the call. A generated image is a `FileContent` after its call
  (not resent: the call's `raw` holds the image). The call's id is the item's `call_id`
  when it has one (so a `program_output` of a later response names its `program`), else
  the item id.
- Result items the vendor ran (`tool_search_output`, `program_output`, a hosted
  `shell_call_output`) become a `ServerToolResult` with `raw` = the item.
- Items the CALLER must run (`local_shell_call`, `shell_call` without a hosted
  environment, `apply_patch_call`, `custom_tool_call`, `tool_search_call` with
  `execution: client`, `computer_call`) become a `ToolCall` with `builtin` = the item
  type and `raw` = the item, opened at `output_item.added`, so the message ends
  `tool_use`; the harness's `ToolResultMessage` goes back as the output item of that type
  (`output_item`; a computer call's result is its screenshot).
- `mcp_approval_request` becomes an `ApprovalRequest`; the user's `ApprovalResponse` goes
  back as `mcp_approval_response`.
- Any other item type is a `VendorContent` holding the item: sent back as it came.

The way back (blocks -> input items, `ServerTool` -> tool objects) is in
`_responses_builtin_out`, which reads the same tables.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Hashable
from typing import Any

from stream_core import (
    ApprovalRequest,
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    Source,
    ToolCall,
)
from stream_core.provider import Assembler, as_object, optional_field

API = "openai-responses"

# --- the tables -------------------------------------------------------------------------

SERVER_CALLS: dict[str, str | None] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
    "image_generation_call": "image_generation",
    "mcp_list_tools": "mcp",
    "mcp_call": "mcp",
    "tool_search_call": "tool_search",  # execution: server (else a CLIENT_CALLS item)
    "shell_call": "shell",  # with a hosted environment (else a CLIENT_CALLS item)
    "program": None,
}
"""Item types of calls the vendor runs -> the portable kind (None: none)."""

TOOL_NAMES: dict[str, str] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
    "tool_search_call": "tool_search",
    "shell_call": "shell",
}
"""Item types of server calls -> the name of the tool that made them (its `type` in the
request's `tools`): `ServerToolCall.name` (an MCP call is named by its own tool)."""

SERVER_RESULTS: dict[str, str | None] = {
    "tool_search_output": "tool_search",
    "program_output": None,
    "shell_call_output": "shell",
}
"""Result items the vendor ran (found in a response's output) -> the portable kind."""

CLIENT_CALLS: dict[str, tuple[str | None, str, str]] = {
    "local_shell_call": ("local_shell", "action", "local_shell_call_output"),
    "shell_call": ("shell", "action", "shell_call_output"),
    "apply_patch_call": ("apply_patch", "operation", "apply_patch_call_output"),
    "custom_tool_call": (None, "input", "custom_tool_call_output"),
    "tool_search_call": ("tool_search", "arguments", "tool_search_output"),
    "computer_call": ("computer", "action", "computer_call_output"),
}
"""Built-in items the caller runs -> (tool name, None: the item's `name`; the field
holding its input; the item type its result goes back as)."""

INPUT_FIELDS: dict[str, tuple[str, ...]] = {
    "web_search_call": ("action",),
    "file_search_call": ("queries",),
    "code_interpreter_call": ("code", "container_id"),
    "image_generation_call": ("revised_prompt", "size", "quality", "background", "output_format"),
    "mcp_list_tools": ("server_label",),
    "tool_search_call": ("arguments",),
    "shell_call": ("action",),
    "program": ("code",),
}
"""A server call's input: these fields of its item, as an object of those present (an
object field alone, `action` or `arguments`: that object). `mcp_call` (and xAI's
`web_search_call`) hold JSON `arguments`."""

USAGE_KINDS: dict[str, str] = {
    # OpenAI `response.tool_usage.<tool>.num_requests`
    "web_search": "web_search",
    "file_search": "file_search",
    "code_interpreter": "code_execution",
    # xAI `usage.server_side_tool_usage_details.<tool>_calls`
    "web_search_calls": "web_search",
    "x_search_calls": "x_search",
    "code_interpreter_calls": "code_execution",
    "file_search_calls": "file_search",
    "mcp_calls": "mcp",
    "document_search_calls": "file_search",
}
"""Vendor server-tool counters -> the kind `Usage.server_tools` counts them under (the
vendor's own name, without `_calls`, for any other)."""

_MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "webp": "image/webp"}
_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))

# --- items -> blocks (translator) -----------------------------------------------------------


def role(item: dict[str, Any], itype: str | None) -> str:
    """`server`, `result`, `client`, `approval` or `vendor` for an item that is not a
    message, reasoning or function call."""
    if itype == "tool_search_call":
        return "client" if item.get("execution") == "client" else "server"
    if itype == "shell_call":
        env = item.get("environment")
        hosted = isinstance(env, dict) and env.get("type") not in (None, "local")
        return "server" if hosted else "client"
    if itype in SERVER_CALLS:
        return "server"
    if itype in CLIENT_CALLS:
        return "client"
    if itype in SERVER_RESULTS:
        return "result"
    if itype == "mcp_approval_request":
        return "approval"
    return "vendor"


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {"input": text}


def _server_input(item: dict[str, Any], itype: str) -> Any:
    arguments = item.get("arguments")
    if isinstance(arguments, str) and itype != "tool_search_call":
        return _json_or_text(arguments) if arguments else {}
    fields = INPUT_FIELDS.get(itype, ())
    if len(fields) == 1 and isinstance(item.get(fields[0]), dict):
        # An `action` or `arguments` object (a search's sources are its result, not input).
        return {k: v for k, v in item[fields[0]].items() if k != "sources"}
    return {f: item[f] for f in fields if item.get(f) is not None}


def _call_id(item: dict[str, Any], where: str) -> str:
    call_id = optional_field(item, "call_id", str, where)
    return call_id or optional_field(item, "id", str, where) or ""


def server_call(item: dict[str, Any], itype: str, where: str) -> ServerToolCall:
    """The call an item of `SERVER_CALLS` is (its input as far as the item holds it)."""
    name = TOOL_NAMES.get(itype, itype)
    if itype == "mcp_call":
        name = optional_field(item, "name", str, where) or itype
    return ServerToolCall(
        id=_call_id(item, where),
        name=name,
        kind=SERVER_CALLS.get(itype),
        input=_server_input(item, itype),
    )


def start_server_call(asm: Assembler, key: Hashable, item: dict[str, Any], itype: str) -> None:
    """`output_item.added`: the call opens (a UI shows "searching..."); its input may stream."""
    asm.start_block(key, server_call(item, itype, "response.output_item.added.item"))


def stream_input(asm: Assembler, key: Hashable, kind: str, obj: dict[str, Any]) -> None:
    """An input delta of an open server call: JSON arguments as they come; a code or
    command fragment as part of a JSON string (`{"code": "...`), the finished item's
    reading replacing it at the end."""
    block = asm.block(key)
    delta = obj.get("delta")
    if not isinstance(block, ServerToolCall) or not isinstance(delta, str) or not delta:
        return
    if kind == "response.mcp_call_arguments.delta":
        asm.block_input(key, delta)
        return
    escaped = json.dumps(delta, ensure_ascii=False)[1:-1]
    if not block.partial_json:
        escaped = '{"code": "' + escaped
    asm.block_input(key, escaped)


def finish_server_call(
    asm: Assembler, key: Hashable, item: dict[str, Any], itype: str, where: str
) -> Any:
    """`output_item.done`: the call as the finished item says, then what the item holds
    of its result (a reading, or a generated image)."""
    final = server_call(item, itype, where)
    block = asm.block(key)
    if not isinstance(block, ServerToolCall):
        asm.start_block(key, final)
        block = final
    else:
        block.id, block.name, block.kind, block.input = (
            final.id,
            final.name,
            final.kind,
            final.input,
        )
        block.partial_json = ""  # the finished item's reading stands
    block.raw = item
    asm.end(key)
    if itype == "image_generation_call":
        image = _image(item, block.id, where)
        if image is not None:
            asm.add_block(image)
        return block
    reading = _reading(item, itype, block, where)
    if reading is not None:
        asm.add_block(reading)
    return block


def _reading(
    item: dict[str, Any], itype: str, call: ServerToolCall, where: str
) -> ServerToolResult | None:
    """The result a server call's own item carries (None when it carries none)."""
    result = ServerToolResult(call_id=call.id, name=call.name, kind=call.kind)
    if itype == "web_search_call":
        action = item.get("action")
        sources = action.get("sources") if isinstance(action, dict) else None
        if not isinstance(sources, list) or not sources:
            return None
        result.sources = [_source(s) for s in sources if isinstance(s, dict)]
    elif itype == "file_search_call":
        found = optional_field(item, "results", list, where)
        if not found:
            return None
        result.sources = [_source(r) for r in found if isinstance(r, dict)]
    elif itype == "mcp_call":
        output, error = item.get("output"), item.get("error")
        if output is None and error is None:
            return None
        result.is_error = error is not None
        result.text = _text(error if error is not None else output)
    elif itype == "mcp_list_tools":
        tools = item.get("tools")
        error = item.get("error")
        if not tools and error is None:
            return None
        names = [t.get("name") for t in tools or () if isinstance(t, dict)]
        result.is_error = error is not None
        result.text = _text(error) if error is not None else ", ".join(map(str, names))
    elif itype == "code_interpreter_call":
        outputs = optional_field(item, "outputs", list, where)
        if not outputs:
            return None
        logs = [o.get("logs") for o in outputs if isinstance(o, dict) and o.get("type") == "logs"]
        images = [o.get("url") for o in outputs if isinstance(o, dict) and o.get("type") == "image"]
        result.text = "\n".join(str(x) for x in logs if x)
        result.sources = [Source(url=u) for u in images if isinstance(u, str)]
    else:
        return None
    return result


def result_block(item: dict[str, Any], itype: str, where: str, last_call: str) -> ServerToolResult:
    """A result item the vendor ran, whole (`raw` = the item)."""
    call_id = optional_field(item, "call_id", str, where) or last_call
    result = ServerToolResult(call_id=call_id, name=itype, kind=SERVER_RESULTS.get(itype), raw=item)
    if itype == "program_output":
        result.text = _text(item.get("result"))
    elif itype == "tool_search_output":
        tools = item.get("tools")
        result.text = ", ".join(
            str(t.get("name")) for t in tools or () if isinstance(t, dict) and t.get("name")
        )
    elif itype == "shell_call_output":
        texts: list[str] = []
        for chunk in item.get("output") or ():
            if not isinstance(chunk, dict):
                continue
            texts += [str(chunk[k]) for k in ("stdout", "stderr") if chunk.get(k)]
            outcome = chunk.get("outcome")
            if isinstance(outcome, dict) and type(outcome.get("exit_code")) is int:
                result.exit_code = outcome["exit_code"]
                result.is_error = outcome["exit_code"] != 0
        result.text = "\n".join(texts)
    return result


def _client_name(item: dict[str, Any], itype: str, where: str) -> str:
    name = CLIENT_CALLS[itype][0]
    return name or optional_field(item, "name", str, where) or itype


def _client_arguments(item: dict[str, Any], itype: str) -> dict[str, Any]:
    value = item.get(CLIENT_CALLS[itype][1])
    if itype == "computer_call":
        # One `action`, or a batch of `actions` (the GA computer tool); the safety checks
        # the harness must acknowledge in its result stay in `raw`.
        if isinstance(value, dict):
            return value
        actions = item.get("actions")
        return {"actions": actions} if isinstance(actions, list) else {}
    if itype == "custom_tool_call" or not isinstance(value, dict):
        return {"input": value} if value is not None else {}
    return value


def start_client_call(asm: Assembler, key: Hashable, item: dict[str, Any], itype: str) -> None:
    """`output_item.added` of a built-in call the caller runs: the call opens now (its
    input, not JSON as it streams, comes whole with the finished item)."""
    where = "response.output_item.added.item"
    call_id = optional_field(item, "call_id", str, where) or ""
    asm.start_tool_call(key, id=call_id, name=_client_name(item, itype, where))
    block = asm.block(key)
    if isinstance(block, ToolCall):
        block.builtin, block.raw = itype, item


def client_call(
    asm: Assembler, key: Hashable, item: dict[str, Any], itype: str, where: str
) -> None:
    """A built-in call the caller runs, from the finished item (its `call_id` there is
    final: it may differ from the one `output_item.added` showed)."""
    call_id = optional_field(item, "call_id", str, where) or ""
    name = _client_name(item, itype, where)
    block = asm.block(key)
    if not isinstance(block, ToolCall):
        asm.start_tool_call(key, id=call_id, name=name)
        block = asm.block(key)
    elif call_id and block.id != call_id:
        asm.set_call_id(key, call_id)  # the added item's id was provisional
    asm.tool_call(key, json.dumps(_client_arguments(item, itype), ensure_ascii=False))
    if isinstance(block, ToolCall):
        block.name = name
        block.builtin = itype
        block.raw = item
        item_id = optional_field(item, "id", str, where)
        if item_id:
            block.thought_signature = item_id
    asm.end(key)


def approval(item: dict[str, Any], where: str) -> ApprovalRequest:
    arguments = item.get("arguments")
    parsed = _json_or_text(arguments) if isinstance(arguments, str) and arguments else {}
    return ApprovalRequest(
        id=optional_field(item, "id", str, where) or "",
        name=optional_field(item, "name", str, where) or "",
        server=optional_field(item, "server_label", str, where),
        arguments=parsed if isinstance(parsed, dict) else {"input": parsed},
        raw=item,
    )


def _image(item: dict[str, Any], call_id: str, where: str) -> FileContent | None:
    data = optional_field(item, "result", str, where)
    if not data:
        return None
    fmt = optional_field(item, "output_format", str, where)
    return FileContent(data=data, mime_type=media_type(data, fmt), call_id=call_id or None)


def media_type(data: str, fmt: str | None) -> str | None:
    """The image's media type from its first bytes, else from the vendor's format name."""
    try:
        head = base64.b64decode(data[:16] + "=" * (-len(data[:16]) % 4), validate=False)
    except (binascii.Error, ValueError):
        head = b""
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return _MEDIA_TYPES.get(fmt or "")


def _source(record: dict[str, Any]) -> Source:
    def s(key: str) -> str | None:
        value = record.get(key)
        return value if isinstance(value, str) else None

    score = record.get("score")
    return Source(
        url=s("url"),
        title=s("title"),
        file_id=s("file_id"),
        filename=s("filename"),
        text=s("text"),
        score=float(score) if isinstance(score, (int, float)) and score is not True else None,
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def citation(annotation: dict[str, Any], offset: int) -> Citation:
    """An `output_text` annotation as a citation: spans in code points of the part's text,
    shifted by `offset` (where the part starts in the block); a point `index` (file
    citations) is an empty span."""

    def s(key: str) -> str | None:
        value = annotation.get(key)
        return value if isinstance(value, str) else None

    def i(key: str) -> int | None:
        value = annotation.get(key)
        return value + offset if type(value) is int and value >= 0 else None

    start, end = i("start_index"), i("end_index")
    if start is None and end is None:
        start = end = i("index")
    return Citation(
        url=s("url"),
        title=s("title"),
        file_id=s("file_id"),
        filename=s("filename"),
        start=start,
        end=end,
        raw=annotation,
    )


def annotations_of(asm: Assembler, key: Hashable, item: dict[str, Any], where: str) -> None:
    """The annotations of a finished message's parts, for a server that sent no
    `annotation.added` events (attached to the open text block under `key`)."""
    offset = 0
    for raw in optional_field(item, "content", list, where) or ():
        part = as_object(raw, f"{where}.content[]")
        for a in part.get("annotations") or ():
            if isinstance(a, dict):
                asm.cite(key, citation(a, offset))
        text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
        offset += len(text) if isinstance(text, str) else 0


def server_tool_counts(usage: dict[str, Any] | None, tool_usage: Any) -> dict[str, int]:
    """The vendor's server-tool counters (OpenAI `tool_usage`, xAI
    `server_side_tool_usage_details`) by kind."""
    counts: dict[str, int] = {}
    if isinstance(tool_usage, dict):
        for name, entry in tool_usage.items():
            n = entry.get("num_requests") if isinstance(entry, dict) else None
            if type(n) is int and isinstance(name, str):
                counts[USAGE_KINDS.get(name, name)] = n
    details = usage.get("server_side_tool_usage_details") if usage else None
    if isinstance(details, dict):
        for name, n in details.items():
            if type(n) is int and isinstance(name, str):
                kind = USAGE_KINDS.get(name) or name.removesuffix("_calls")
                counts[kind] = counts.get(kind, 0) + n
    return counts
