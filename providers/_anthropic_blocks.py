"""The Messages API's blocks beyond text, thinking and tool calls, in both directions: what
a stream's `server_tool_use`, `mcp_tool_use`, `*_tool_result`, citation and unknown blocks
become (`BlockReader`, for the translator), and what our blocks become on the wire again
(`encode_*`, for the request builder and for `vendor_bytes`). One table per fact, read by
both directions, so what is written is what is read.

- `server_tool_use` / `mcp_tool_use` -> `ServerToolCall` (`kind` from `TOOL_KINDS`, input
  streamed by `input_json_delta`, `caller` kept, `raw` = the start block with its final
  input); back: `raw` verbatim.
- every `*_tool_result` -> `ServerToolResult` (`call_id` = `tool_use_id`, sources, text,
  exit code, `is_error`; `raw` = the block verbatim), then one `FileContent` per file a
  code run wrote (`*_output` file ids); back: `raw` verbatim, files inside it.
- `citations_delta` -> a `Citation` on the text block it arrives in (the whole block: no
  span); back: the text block's `citations`, each record verbatim.
- any other block (`container_upload`, `compaction`, a type not yet known) ->
  `VendorContent` holding the block, its streamed deltas merged in; back: verbatim.
- `usage.server_tool_use` -> `Usage.server_tools` (`web_search_requests` -> `web_search`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from stream_core import (
    Citation,
    FileContent,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    Source,
    VendorContent,
)
from stream_core.provider import Assembler, as_object, optional_field, refuse_unsaid_options

__all__ = [
    "API",
    "CALL_TYPES",
    "FILE_TYPES",
    "RESULT_SUFFIX",
    "SERVER_TOOLS",
    "TOOL_KINDS",
    "TOOL_TYPES",
    "BlockReader",
    "encode_block",
    "encode_citation",
    "encode_server_tool_counts",
    "encode_streamed",
    "encode_server_call",
    "encode_server_result",
    "read_citation",
    "server_tool_counts",
    "tool_betas",
]

API = "anthropic-messages"

# --- tables -------------------------------------------------------------------------------

TOOL_KINDS: dict[str, str] = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
    "tool_search_tool_bm25": "tool_search",
    "tool_search_tool_regex": "tool_search",
    "tool_search": "tool_search",  # a result's name when its call was in an earlier message
    "mcp": "mcp",
}
"""A server tool's name (`server_tool_use.name`, or a `*_tool_result` type less that
suffix) -> its portable kind (`SERVER_TOOL_KINDS`). A name not here has no kind."""

CALL_TYPES = frozenset({"server_tool_use", "mcp_tool_use"})
RESULT_SUFFIX = "_tool_result"

# Portable kind -> (tool type, name) Anthropic documents for it (tool reference pages:
# web search `web_search_20250305`, web fetch `web_fetch_20250910`, code execution
# `code_execution_20250825`, tool search `tool_search_tool_bm25_20251119`).
TOOL_TYPES: dict[str, tuple[str, str]] = {
    "web_search": ("web_search_20250305", "web_search"),
    "web_fetch": ("web_fetch_20250910", "web_fetch"),
    "code_execution": ("code_execution_20250825", "code_execution"),
    "tool_search": ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
}
_DOMAIN_KINDS = frozenset({"web_search", "web_fetch"})
# The common `ServerTool` options each tool object has a field for (tool reference pages);
# one set on a tool without the field raises rather than being left out unsaid.
_OPTIONS: dict[str, frozenset[str]] = {
    "web_search": frozenset({"max_uses", "allowed_domains", "blocked_domains", "user_location"}),
    "web_fetch": frozenset({"max_uses", "allowed_domains", "blocked_domains"}),
}

BETAS: dict[str, str] = {
    "web_fetch_20250910": "web-fetch-2025-09-10",
    "code_execution_20250825": "code-execution-2025-08-25",
    "code_execution_20250522": "code-execution-2025-05-22",
    "tool_search_tool_bm25_20251119": "advanced-tool-use-2025-11-20",
    "tool_search_tool_regex_20251119": "advanced-tool-use-2025-11-20",
}
"""A tool type -> the beta header it needs (added only when a request sends that tool)."""
FILES_BETA = "files-api-2025-04-14"
"""Needed by a request that names an uploaded file (`{"type": "file", "file_id"}`)."""

FILE_TYPES = frozenset(
    {"application/pdf", "text/plain", "image/jpeg", "image/png", "image/gif", "image/webp"}
)
"""What a `FileContent` in a user message or a tool result may be: a PDF or plain-text
`document`, or an `image`."""


def _tool(kind: str) -> Callable[[ServerTool], dict[str, Any]]:
    vendor_type, name = TOOL_TYPES[kind]

    def build(tool: ServerTool) -> dict[str, Any]:
        refuse_unsaid_options(tool, _OPTIONS.get(kind, ()), f"{API}'s {vendor_type} tool")
        if tool.allowed_domains is not None and tool.blocked_domains is not None:
            raise ValueError(
                f"ServerTool(kind={kind!r}): {API} takes allowed_domains or "
                "blocked_domains, not both"
            )
        out: dict[str, Any] = {"type": vendor_type, "name": name}
        if tool.max_uses is not None and kind in _DOMAIN_KINDS:
            out["max_uses"] = tool.max_uses
        if kind in _DOMAIN_KINDS:
            if tool.allowed_domains is not None:
                out["allowed_domains"] = list(tool.allowed_domains)
            if tool.blocked_domains is not None:
                out["blocked_domains"] = list(tool.blocked_domains)
        if kind == "web_search" and tool.user_location is not None:
            where = tool.user_location.model_dump(exclude_none=True)
            out["user_location"] = {"type": "approximate", **where}
        return out

    return build


SERVER_TOOLS: dict[str, Callable[[ServerTool], dict[str, Any]]] = {
    kind: _tool(kind) for kind in TOOL_TYPES
}
"""`WireAPI.server_tools`: the kinds the Messages API runs -> their tool objects."""


VERTEX_BETAS: dict[str, str] = {"advanced-tool-use-2025-11-20": "tool-search-tool-2025-10-19"}
"""Claude on Vertex AI names some betas differently (tool search)."""


def tool_betas(tools: Iterable[dict[str, Any]], *, vertex: bool = False) -> list[str]:
    """The beta headers the payload's tools need (`vertex`: as Vertex AI names them)."""
    out: list[str] = []
    for tool in tools:
        vendor_type = tool.get("type")
        beta = BETAS.get(vendor_type) if isinstance(vendor_type, str) else None
        if beta is not None and vertex:
            beta = VERTEX_BETAS.get(beta, beta)
        if beta is not None and beta not in out:
            out.append(beta)
    return out


def server_tool_counts(usage: Mapping[str, Any]) -> dict[str, int]:
    """`usage.server_tool_use` as `Usage.server_tools`: `web_search_requests` ->
    `web_search` (the portable kind where there is one); non-integer counts are skipped."""
    out: dict[str, int] = {}
    for key, n in usage.items():
        if type(n) is not int:
            continue
        name = key.removesuffix("_requests")
        out[TOOL_KINDS.get(name, name)] = n
    return out


# --- reading ------------------------------------------------------------------------------


def _str(obj: Mapping[str, Any], key: str) -> str | None:
    """A readable string field, or None (a reading: the block itself is kept verbatim)."""
    value = obj.get(key)
    return value if type(value) is str else None


def read_citation(c: dict[str, Any]) -> Citation:
    """A citation record (`web_search_result_location`, `char_location`, `page_location`,
    `content_block_location`, `search_result_location`, ...) as a `Citation` of the whole
    text block it is attached to; `raw` is the record verbatim."""
    index = c.get("document_index")
    return Citation(
        url=_str(c, "url") or _str(c, "source"),
        title=_str(c, "title") or _str(c, "document_title"),
        file_id=_str(c, "file_id"),
        document_index=index if type(index) is int else None,
        cited_text=_str(c, "cited_text") or None,  # "" quotes nothing
        raw=c,
    )


def _result_text(content: Any) -> tuple[str, list[Source], int | None, bool]:
    """(text, sources, exit code, is_error) read from a result's `content`."""
    if isinstance(content, str):
        return content, [], None, False
    if isinstance(content, list):
        sources, texts = [], []
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "web_search_result" or "url" in item:
                sources.append(Source(url=_str(item, "url"), title=_str(item, "title")))
            elif _str(item, "text") is not None:
                texts.append(item["text"])
        return "\n".join(texts), sources, None, False
    if not isinstance(content, dict):
        return "", [], None, False
    ctype = _str(content, "type") or ""
    code = _str(content, "error_code")
    if code is not None or ctype.endswith("_error"):
        message = _str(content, "error_message")
        text = f"{code}: {message}" if code and message else code or message or ""
        return text, [], None, True
    if ctype == "web_fetch_result":
        doc = content.get("content")
        doc = doc if isinstance(doc, dict) else {}
        source = doc.get("source")
        text = ""
        if isinstance(source, dict) and source.get("type") == "text":
            text = _str(source, "data") or ""
        return text, [Source(url=_str(content, "url"), title=_str(doc, "title"))], None, False
    if ctype == "tool_search_tool_search_result":
        refs = content.get("tool_references")
        refs = refs if isinstance(refs, list) else []
        names = [_str(r, "tool_name") for r in refs if isinstance(r, dict)]
        return "\n".join(n for n in names if n), [], None, False
    stdout, stderr = _str(content, "stdout") or "", _str(content, "stderr") or ""
    if stdout and stderr and not stdout.endswith("\n"):
        stdout += "\n"
    text = stdout + stderr
    if not text:
        if isinstance(content.get("lines"), list):  # text editor str_replace
            text = "\n".join(x for x in content["lines"] if type(x) is str)
        else:  # text editor view; any future result with text
            text = _str(content, "content") or _str(content, "text") or ""
    code_value = content.get("return_code")
    return text, [], code_value if type(code_value) is int else None, False


def _files(content: Any, call_id: str) -> list[FileContent]:
    """The files a code run wrote (`content.content[]` of `*_output` items with ids)."""
    outputs = content.get("content") if isinstance(content, dict) else None
    if not isinstance(outputs, list):
        return []
    return [
        FileContent(file_id=o["file_id"], call_id=call_id or None)
        for o in outputs
        if isinstance(o, dict) and type(o.get("file_id")) is str and o["file_id"]
    ]


def read_result(block: dict[str, Any], name: str | None) -> tuple[ServerToolResult, list[Any]]:
    """A `*_tool_result` block as a result and the files it carries. `name` is the call's
    when it came in this message (else read from the block's type)."""
    where = "content_block"
    btype = optional_field(block, "type", str, where) or ""
    call_id = optional_field(block, "tool_use_id", str, where) or ""
    name = name or btype.removesuffix(RESULT_SUFFIX)
    kind = TOOL_KINDS.get(name) or TOOL_KINDS.get(btype.removesuffix(RESULT_SUFFIX))
    content = block.get("content")
    text, sources, exit_code, is_error = _result_text(content)
    result = ServerToolResult(
        call_id=call_id,
        name=name,
        kind=kind,
        is_error=is_error or block.get("is_error") is True,
        text=text,
        sources=sources,
        exit_code=exit_code,
        raw=block,
    )
    return result, _files(content, call_id)


def _merge(data: dict[str, Any], delta: dict[str, Any]) -> None:
    """A delta of an unknown block merged into it: strings appended, others replaced."""
    for field, value in delta.items():
        if field == "type":
            continue
        old = data.get(field)
        if type(value) is str and (old is None or type(old) is str):
            data[field] = (old or "") + value
        else:
            data[field] = value


class BlockReader:
    """The translator's state for the blocks of this module, by vendor content index:
    open server calls (their start block), results (their files, added once they end)
    and vendor blocks (their streamed JSON)."""

    __slots__ = ("calls", "names", "open")

    def __init__(self) -> None:
        self.open: dict[int, tuple[str, Any]] = {}
        """Vendor index -> ("call", start block) | ("result", files) | ("vendor", json)."""
        self.names: dict[str, str] = {}
        """Server call id -> its tool name, for the results that answer it."""

    def start(self, asm: Assembler, key: int, block: dict[str, Any], btype: str | None) -> None:
        where = "content_block_start.content_block"
        if btype in CALL_TYPES:
            call_id = optional_field(block, "id", str, where) or ""
            name = optional_field(block, "name", str, where) or ""
            self.names[call_id] = name
            call = ServerToolCall(
                id=call_id,
                name=name,
                kind="mcp" if btype == "mcp_tool_use" else TOOL_KINDS.get(name),
                caller=optional_field(block, "caller", dict, where),
                raw=block,
            )
            asm.start_block(key, call)
            self.open[key] = ("call", block)
            initial = block.get("input")
            if isinstance(initial, dict) and initial:
                # A whole answer (no deltas follow) carries the input here.
                asm.block_input(key, json.dumps(initial, ensure_ascii=False))
        elif btype is not None and btype.endswith(RESULT_SUFFIX):
            answers = optional_field(block, "tool_use_id", str, where) or ""
            called = self.names.get(answers)
            if btype == "mcp_tool_result" and called is None:
                called = "mcp"
            result, files = read_result(block, called)
            if btype == "mcp_tool_result":
                result.kind = "mcp"
            asm.start_block(key, result)
            self.open[key] = ("result", files)
        else:
            asm.start_block(key, VendorContent(api=API, data=block))
            self.open[key] = ("vendor", "")

    def delta(self, asm: Assembler, key: int, delta: dict[str, Any], dtype: str | None) -> None:
        """A delta other than text and thinking: a server call's input, a citation, or
        one of a vendor block."""
        if dtype == "citations_delta":
            citation = as_object(delta.get("citation"), "citations_delta.citation")
            asm.cite(key, read_citation(citation))
            return
        state = self.open.get(key)
        if state is None:
            return  # a delta of a block that never started: nothing to attach it to
        what, value = state
        if what == "call" and dtype == "input_json_delta":
            fragment = optional_field(delta, "partial_json", str, "input_json_delta")
            asm.block_input(key, fragment or "")
        elif what == "vendor":
            block = asm.block(key)
            if not isinstance(block, VendorContent):
                return
            if dtype == "input_json_delta":
                fragment = optional_field(delta, "partial_json", str, "input_json_delta")
                self.open[key] = ("vendor", value + (fragment or ""))
            else:
                _merge(block.data, delta)

    def stop(self, asm: Assembler, key: int) -> None:
        what, value = self.open.pop(key)
        block = asm.block(key)
        asm.end(key)
        if what == "call" and isinstance(block, ServerToolCall):
            block.raw = {**value, "input": block.input}
        elif what == "result":
            for file in value:
                asm.add_block(file)
        elif what == "vendor" and value and isinstance(block, VendorContent):
            try:
                block.data["input"] = json.loads(value)
            except ValueError:
                block.data["input"] = {"partial_json": value}


# --- writing ------------------------------------------------------------------------------


def encode_citation(c: Citation) -> dict[str, Any]:
    """A citation as the Messages API record: its `raw` verbatim, else one built from it
    (a web search result location when it has a URL, else a document's char location)."""
    if c.raw is not None:
        return c.raw
    if c.url is not None:
        out: dict[str, Any] = {"type": "web_search_result_location", "url": c.url}
        if c.title is not None:
            out["title"] = c.title
        out["cited_text"] = c.cited_text or ""
        out["encrypted_index"] = ""
        return out
    return {
        "type": "char_location",
        "cited_text": c.cited_text or "",
        "document_index": c.document_index or 0,
        "document_title": c.title,
        "start_char_index": 0,
        "end_char_index": len(c.cited_text or ""),
    }


def encode_server_call(call: ServerToolCall) -> dict[str, Any]:
    """A server call as its `server_tool_use` (or `mcp_tool_use`) block."""
    if call.raw is not None:
        return call.raw
    out: dict[str, Any] = {
        "type": "server_tool_use",
        "id": call.id,
        "name": call.name or TOOL_TYPES.get(call.kind or "", ("", ""))[1],
        "input": call.input,
    }
    if call.caller is not None:
        out["caller"] = call.caller
    return out


def encode_server_result(
    result: ServerToolResult, files: Iterable[FileContent] = ()
) -> dict[str, Any]:
    """A server result as its `*_tool_result` block: `raw` verbatim, else one built from
    its reading (with `files`, the code run's outputs) that reads back the same."""
    if result.raw is not None:
        return result.raw
    name = result.name or result.kind or "server_tool"
    kind = result.kind or TOOL_KINDS.get(name)
    head: dict[str, Any] = {"tool_use_id": result.call_id}
    if kind == "mcp":
        content_list = [{"type": "text", "text": result.text}] if result.text else []
        return {"type": "mcp_tool_result", **head, "is_error": result.is_error,
                "content": content_list}  # fmt: skip
    if kind == "tool_search":
        name = "tool_search"
    rtype = name + RESULT_SUFFIX
    if result.is_error:
        return {**head, "type": rtype, "content": {
            "type": f"{rtype}_error", "error_code": result.text or "unavailable"}}  # fmt: skip
    content: Any
    if kind == "web_search":
        content = [
            {"type": "web_search_result", "encrypted_content": "",
             **{k: v for k, v in (("url", s.url), ("title", s.title)) if v is not None}}
            for s in result.sources
        ]  # fmt: skip
    elif kind == "web_fetch":
        source = result.sources[0] if result.sources else Source()
        doc: dict[str, Any] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": result.text},
        }
        if source.title is not None:
            doc["title"] = source.title
        content = {"type": "web_fetch_result", "url": source.url or "", "content": doc}
    elif kind == "tool_search":
        refs = [{"type": "tool_reference", "tool_name": n} for n in result.text.split("\n") if n]
        content = {"type": "tool_search_tool_search_result", "tool_references": refs}
    else:
        output = (
            "bash_code_execution_output" if name.startswith("bash") else "code_execution_output"
        )
        content = {
            "type": f"{name}_result",
            "stdout": result.text,
            "stderr": "",
            "return_code": result.exit_code if result.exit_code is not None else 0,
            "content": [{"type": output, "file_id": f.file_id} for f in files if f.file_id],
        }
    return {"type": rtype, **head, "content": content}


def encode_block(block: Any, following: Iterable[Any] = ()) -> dict[str, Any] | None:
    """A block of a `block_*` kind in an assistant message as its Messages API block;
    `following` are the blocks after it (a result's generated files). None: a generated
    file, which its result block carries. Raises for what the API has no block for."""
    if isinstance(block, ServerToolCall):
        return encode_server_call(block)
    if isinstance(block, ServerToolResult):
        files = [f for f in following if isinstance(f, FileContent) and f.call_id]
        return encode_server_result(block, [f for f in files if f.call_id == block.call_id])
    if isinstance(block, VendorContent) and block.api == API:
        return block.data
    if isinstance(block, FileContent) and block.call_id:
        return None
    raise ValueError(f"{API} has no block for a {type(block).__name__} in an answer")


def encode_server_tool_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """`Usage.server_tools` as `usage.server_tool_use` (`web_search` -> `web_search_requests`)."""
    return {f"{name}_requests": n for name, n in counts.items()}


def encode_streamed(blocks: Sequence[Any], index: int) -> tuple[dict[str, Any], list[Any]] | None:
    """`blocks[index]` (a `block_*` kind among a message's blocks) as a stream sends it:
    its `content_block_start` block and deltas (a server call's input as one
    `input_json_delta`). None for a generated file: the result before it carries it."""
    block = blocks[index]
    if isinstance(block, FileContent) and block.call_id:
        if not any(
            isinstance(b, ServerToolResult) and b.call_id == block.call_id for b in blocks[:index]
        ):
            raise ValueError(
                f"{API} streams a generated file only inside the code execution result "
                f"that made it: no ServerToolResult for {block.call_id!r} comes before it"
            )
        return None
    whole = encode_block(block, blocks[index + 1 :])
    assert whole is not None
    if getattr(block, "raw", True) is None:
        _check_said(block, whole)
    if whole.get("type") not in CALL_TYPES:
        return whole, []
    value = whole.get("input")
    deltas = []
    if value not in ({}, None):
        text = json.dumps(value, ensure_ascii=False)
        deltas.append({"type": "input_json_delta", "partial_json": text})
    return {**whole, "input": {}}, deltas


def _differ(scripted: Any, back: Any) -> list[str]:
    """The fields where the translator's reading of a written block is not the script."""
    want, got = scripted.model_dump(exclude={"raw"}), back.model_dump(exclude={"raw"})
    return [name for name in {**want, **got} if got.get(name) != want.get(name)]


def _check_said(block: Any, written: dict[str, Any]) -> None:
    """Raise, naming the fields, when the translator would read `written` back as other
    than the scripted `block` (`vendor_bytes` never changes a block silently)."""
    if isinstance(block, ServerToolCall):
        kind = "mcp" if written.get("type") == "mcp_tool_use" else TOOL_KINDS.get(block.name)
        if not block.name or block.kind != kind:
            raise ValueError(
                f"vendor_bytes: {API} names a server call by its tool and reads its kind "
                f"from that name: {block.name!r} is kind {kind!r}, not {block.kind!r} "
                "(give the vendor's block in `raw`)"
            )
    elif isinstance(block, ServerToolResult):
        back = read_result(written, block.name or None)[0]
        if written.get("type") == "mcp_tool_result":
            back.kind = "mcp"
        wrong = _differ(block, back)
        if wrong:
            raise ValueError(
                f"vendor_bytes: {API} has no way to say this {block.name} result's "
                f"{', '.join(wrong)} ({', '.join(f'{k}={getattr(block, k)!r}' for k in wrong)}"
                f" would read back as {', '.join(repr(getattr(back, k)) for k in wrong)}: "
                "a code result always has an exit_code); give the vendor's block in `raw`"
            )


def script_citation(c: Citation) -> dict[str, Any]:
    """`encode_citation` for `vendor_bytes`: a record the translator reads back as `c`.
    Anthropic cites whole text blocks (a cited passage is its own text block): a span
    (`start`/`end`) raises; script the cited text as its own `TextContent` with a
    whole-block citation, as Anthropic streams it. Any other field the record cannot say
    raises, named."""
    record = encode_citation(c)
    if c.raw is not None:
        return record
    if c.start is not None or c.end is not None:
        raise ValueError(
            f"vendor_bytes: {API} cites whole text blocks, so a citation's `start`/`end` "
            f"({c.start}, {c.end}) cannot be said: script the cited text as its own "
            "TextContent with a whole-block citation (start and end unset)"
        )
    wrong = _differ(c, read_citation(record))
    if wrong:
        raise ValueError(
            f"vendor_bytes: {API} has no field for a citation's {', '.join(wrong)} here "
            f"(a {record.get('type')} record); leave it unset or give the vendor's `raw`"
        )
    return record
