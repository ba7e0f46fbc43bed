"""Bedrock Converse's blocks beyond text, reasoning and function calls, both ways: the one
table of each (read by the translator in `providers/bedrock.py`, the request builder in
`_bedrock_messages.py` and `vendor_bytes` in `stream_core/testing/_synthesize.py`).

- Documents (`DocumentBlock`): a `FileContent` of a documented document type in a user
  message or a tool result becomes `{"document": {format, name, source, citations?}}`, its
  bytes as base64 (the REST API takes blobs as base64 text) or an `s3://` URL as
  `s3Location`. Other URLs and vendor file ids have no Converse form and raise at `stream()`.
  Converse documents no per-model list in this catalog, so every model of the API is
  offered documents; a model that refuses one answers with its ValidationException.
- Citations (`ContentBlockDelta.citation`, a `CitationsDelta` per cited passage; the whole
  answer's `citationsContent` blocks when not streamed) become `Citation`s on the text block
  of the same `contentBlockIndex` (the whole block: Converse gives no span in our text),
  `raw` = the vendor record. They go back as a `citationsContent` block, which `ContentBlock`
  documents for messages sent as well as received.
- Server tools (Amazon Nova's system tools: `nova_grounding` = web search, Nova Premier and
  Nova 2; `nova_code_interpreter` = code execution, Nova 2): a `toolUse` of type
  `server_tool_use` is a `ServerToolCall`, a `toolResult` block in the assistant's message
  is its `ServerToolResult` (code output read from Nova's `{stdOut, stdErr, exitCode,
  isError}`); both go back verbatim (`raw`) in the assistant message. Asked for with
  `ServerTool("web_search" | "code_execution")`, sent as `{"systemTool": {"name": ...}}`
  to Nova models only; the common options (domains, max uses, location) have no Converse
  field and raise. `usage.serverToolUsage` counts are reported by kind.
- Generated images (`ImageBlockStart` + `ImageBlockDelta`) are a `FileContent` (base64,
  `image/<format>`) in the assistant message, sent back as the `image` block they came as.
- Any other block start or delta member is kept as a `VendorContent` whose `data` is the
  Converse `ContentBlock` the deltas build (strings joined, lists extended, objects merged),
  sent back unchanged to this API.

`stream_block` and `usage_record` write the same shapes for `vendor_bytes`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Hashable
from typing import Any

from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    VendorContent,
)
from stream_core.provider import (
    BEDROCK_IMAGE_FORMATS,
    Assembler,
    as_object,
    optional_field,
)

from ._bedrock_tools import SYSTEM_TOOLS

__all__ = [
    "API",
    "DOCUMENT_FORMATS",
    "FILE_TYPES",
    "USAGE_FIELDS",
    "BlockReader",
    "assistant_block",
    "citation_of",
    "citation_record",
    "script_citation",
    "document_block",
    "image_block",
    "read_block",
    "server_tool_counts",
    "usage_record",
    "stream_block",
    "text_block",
    "user_block",
]

API = "bedrock-converse-stream"
"""The wire API `providers/bedrock.py` serves."""

# https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_DocumentBlock.html
DOCUMENT_FORMATS: dict[str, str] = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
"""Media type -> `DocumentBlock.format` (the formats Converse documents)."""
FILE_TYPES = frozenset(DOCUMENT_FORMATS)
"""`WireAPI.file_types`: the media types a `FileContent` sent to Converse may have."""
_EXTENSIONS = frozenset(DOCUMENT_FORMATS.values())
_IMAGE_TYPES = {fmt: mime for mime, fmt in BEDROCK_IMAGE_FORMATS.items() if mime != "image/jpg"}

USAGE_FIELDS: dict[str, str] = {
    "input": "inputTokens",
    "output": "outputTokens",
    "cache_read": "cacheReadInputTokens",
    "cache_write": "cacheWriteInputTokens",
}
"""Our usage field <- Converse's (one snapshot, in `metadata`)."""


# Document names: alphanumerics, single spaces, hyphens, parentheses and square brackets.
_NAME_BAD = re.compile(r"[^A-Za-z0-9 \-()\[\]]+")
_NAME_MAX = 190  # of DocumentBlock's 200, leaving room for a " (n)" that makes it unique
_CODE_OUTPUT = ("stdOut", "stdErr", "exitCode", "isError")
_SYSTEM_NAMES = {kind: name for name, kind in SYSTEM_TOOLS.items()}


# --- request ----------------------------------------------------------------------------


def document_block(file: FileContent, names: set[str], where: str) -> dict[str, Any]:
    """A user's or a tool result's file as a Converse `document` block; `names` holds the
    names already used in the request (Converse wants them unique)."""
    if file.data is not None:
        source: dict[str, Any] = {"bytes": file.data}
    elif file.url is not None and file.url.startswith("s3://"):
        source = {"s3Location": {"uri": file.url}}
    else:
        what = f"URL {file.url[:60]!r}" if file.url else f"file id {file.file_id!r}"
        raise ValueError(
            f"{where}: {API} takes a FileContent as base64 data or an s3:// URL, not a "
            f"{what} (download it and send its data)"
        )
    fmt = DOCUMENT_FORMATS.get((file.mime_type or "").lower())
    if fmt is None:
        ext = (file.name or file.url or "").rsplit(".", 1)[-1].lower()
        if ext not in _EXTENSIONS:
            raise ValueError(f"{where}: {API} needs the document's media type (mime_type)")
        fmt = ext
    document: dict[str, Any] = {"format": fmt, "name": _name(file.name, names), "source": source}
    if file.citations is not None:
        document["citations"] = {"enabled": file.citations}
    return {"document": document}


def _name(given: str | None, names: set[str]) -> str:
    base = re.sub(r"\.[A-Za-z0-9]{1,5}$", "", given or "")  # the format says the type
    base = " ".join(_NAME_BAD.sub(" ", " ".join(base.split())).split())[:_NAME_MAX].strip()
    base = base or "document"
    name, n = base, 1
    while name in names:
        n += 1
        name = f"{base} ({n})"
    names.add(name)
    return name


def user_block(block: object, names: set[str], where: str) -> dict[str, Any] | None:
    """A user or tool-result block other than text and images (None: not one of these)."""
    if isinstance(block, FileContent):
        return document_block(block, names, where)
    if isinstance(block, VendorContent):
        return _vendor(block, where)
    if isinstance(block, ApprovalResponse):
        raise ValueError(f"{where}: {API} has no approvals to answer (an ApprovalResponse)")
    return None


def citation_record(c: Citation) -> dict[str, Any]:
    """A citation as Converse's `Citation` (the vendor's record when it came from Converse)."""
    if c.raw is not None:
        return c.raw
    record: dict[str, Any] = {}
    if c.title:
        record["title"] = c.title
    if c.cited_text:
        record["sourceContent"] = [{"text": c.cited_text}]
    if c.url:
        record["location"] = {"web": {"url": c.url}}
    return record


def script_citation(c: Citation) -> dict[str, Any]:
    """`citation_record` for `vendor_bytes`: a record `citation_of` reads back as `c`, a
    document cited by `document_index` in a `documentChar` location. Converse cites whole
    text blocks (its locations are spans of the source), so a `start`/`end` raises, as does
    any field the record cannot say (named)."""
    record = citation_record(c)
    if c.raw is None and c.document_index is not None and not c.url:
        record["location"] = {"documentChar": {"documentIndex": c.document_index}}
    back = citation_of(record).model_dump(exclude={"raw"})
    wrong = [k for k, v in c.model_dump(exclude={"raw"}).items() if back.get(k) != v]
    wrong += [k for k in back if k not in c.model_dump(exclude={"raw"})]
    if c.raw is None and wrong:
        raise ValueError(
            f"vendor_bytes: {API} has no way to say a citation's {', '.join(wrong)} (it cites "
            "whole text blocks, by one web or document location); leave it unset or give "
            "the vendor's `raw`"
        )
    return record


def text_block(block: TextContent) -> dict[str, Any]:
    if not block.citations:
        return {"text": block.text}
    records = [citation_record(c) for c in block.citations]
    return {"citationsContent": {"content": [{"text": block.text}], "citations": records}}


def image_block(file: FileContent, where: str) -> dict[str, Any]:
    fmt = BEDROCK_IMAGE_FORMATS.get((file.mime_type or "").lower())
    if file.data is None or fmt is None:
        # Converse's assistant content holds images (generated ones) but no other files.
        raise ValueError(
            f"{where}: {API} takes no FileContent ({file.mime_type}) in an assistant "
            "message, only generated images as base64 data"
        )
    return {"image": {"format": fmt, "source": {"bytes": file.data}}}


def assistant_block(block: object, where: str) -> dict[str, Any] | None:
    """An assistant block other than text, reasoning and calls, in its Converse form (None:
    not one of these)."""
    if isinstance(block, ServerToolCall):
        raw = block.raw or {"toolUseId": block.id, "name": block.name, "type": "server_tool_use"}
        return {"toolUse": raw if "input" in raw else {**raw, "input": block.input}}
    if isinstance(block, ServerToolResult):
        if block.raw is not None:
            return {"toolResult": block.raw}
        status = "error" if block.is_error else "success"
        content = [{"text": block.as_text()}]
        return {"toolResult": {"toolUseId": block.call_id, "content": content, "status": status}}
    if isinstance(block, VendorContent):
        return _vendor(block, where)
    if isinstance(block, FileContent):
        return image_block(block, where)
    if isinstance(block, ApprovalRequest):
        raise ValueError(f"{where}: {API} has no approval requests (an ApprovalRequest)")
    return None


def _vendor(block: VendorContent, where: str) -> dict[str, Any]:
    if block.api != API:  # `prepare_messages` turns another API's blocks into text
        raise ValueError(f"{where}: a VendorContent of {block.api} cannot go to {API}")
    return block.data


# --- response ---------------------------------------------------------------------------


def citation_of(raw: dict[str, Any], where: str = "citation") -> Citation:
    """A Converse `Citation` / `CitationsDelta` read (`raw` kept verbatim)."""
    title = optional_field(raw, "title", str, where)
    source = optional_field(raw, "source", str, where)
    parts = optional_field(raw, "sourceContent", list, where) or []
    cited = "".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
    location = optional_field(raw, "location", dict, where) or {}
    web = location.get("web")
    url = web.get("url") if isinstance(web, dict) else None
    if not isinstance(url, str) and source and source.startswith(("https://", "http://")):
        url = source
    index = None
    for name in ("documentChar", "documentPage", "documentChunk"):
        found = location.get(name)
        value = found.get("documentIndex") if isinstance(found, dict) else None
        if type(value) is int and value >= 0:
            index = value
    return Citation(
        url=url if isinstance(url, str) else None,
        title=title,
        document_index=index,
        cited_text=cited or None,
        raw=raw,
    )


def server_tool_counts(usage: dict[str, Any]) -> dict[str, int]:
    """`usage.serverToolUsage` as counts by kind (its names where no kind fits); a shape
    other than name -> count is not read."""
    counts = usage.get("serverToolUsage")
    if not isinstance(counts, dict):
        return {}
    return {str(SYSTEM_TOOLS.get(k, k)): v for k, v in counts.items() if type(v) is int}


def _read_result(block: ServerToolResult, content: list[Any]) -> None:
    """A tool result's text (and exit code: Nova's code output) from its content items."""
    texts: list[str] = []
    for item in content:
        value = item.get("json") if isinstance(item, dict) else None
        text = item.get("text") if isinstance(item, dict) else None
        if isinstance(text, str):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and "stdOut" in parsed:
                value = parsed
            else:
                texts.append(text)
                continue
        if isinstance(value, dict) and any(k in value for k in _CODE_OUTPUT):
            out, err, code = value.get("stdOut"), value.get("stdErr"), value.get("exitCode")
            texts += [s for s in (out, err) if isinstance(s, str) and s]
            if type(code) is int:
                block.exit_code = code
            if value.get("isError") is True:
                block.is_error = True
        elif value is not None:
            texts.append(json.dumps(value, ensure_ascii=False))
    block.text = "\n".join(texts)


def _result(raw: dict[str, Any], names: dict[str, str], where: str) -> ServerToolResult:
    call_id = optional_field(raw, "toolUseId", str, where) or ""
    vendor_type = optional_field(raw, "type", str, where) or ""
    name = names.get(call_id) or vendor_type.removesuffix("_result")
    return ServerToolResult(
        call_id=call_id,
        name=name,
        kind=SYSTEM_TOOLS.get(name),
        is_error=optional_field(raw, "status", str, where) == "error",
        raw=raw,
    )


def _image(image: dict[str, Any], chunks: list[str]) -> FileContent | VendorContent:
    """A generated image: a FileContent when its bytes came whole and decode, else the
    vendor's block as it came (an `error` instead of bytes, an unknown format)."""
    fmt = image.get("format")
    mime = _IMAGE_TYPES.get(fmt) if isinstance(fmt, str) else None
    if mime is not None and chunks and "error" not in image:
        try:
            data = b"".join(base64.b64decode(c, validate=True) for c in chunks)
        except (binascii.Error, ValueError):
            data = b""
        if data:
            return FileContent(data=base64.b64encode(data).decode(), mime_type=mime)
    if chunks:
        image = {**image, "source": {"bytes": "".join(chunks)}}
    return VendorContent(api=API, data={"image": image})


def _merge(into: dict[str, Any], part: dict[str, Any]) -> None:
    """Fold a delta into a block: strings joined, lists extended, objects merged."""
    for k, v in part.items():
        old = into.get(k)
        if isinstance(old, str) and isinstance(v, str):
            into[k] = old + v
        elif isinstance(old, list) and isinstance(v, list):
            old.extend(v)
        elif isinstance(old, dict) and isinstance(v, dict):
            _merge(old, v)
        else:
            into[k] = v


def read_block(asm: Assembler, key: Hashable, block: dict[str, Any], where: str) -> bool:
    """A block of the non-streamed `Converse` answer, if it is one read here (False: text,
    reasoning or a function call, the translator's own)."""
    cited = optional_field(block, "citationsContent", dict, where)
    tool = optional_field(block, "toolUse", dict, where)
    if cited is not None:
        where += ".citationsContent"
        for part in optional_field(cited, "content", list, where) or []:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str):
                asm.text(key, text)
        for i, raw in enumerate(optional_field(cited, "citations", list, where) or []):
            asm.cite(key, citation_of(as_object(raw, f"{where}.citations[{i}]")))
    elif tool is not None:
        if tool.get("type") != "server_tool_use":
            return False
        name = optional_field(tool, "name", str, where) or ""
        asm.add_block(
            ServerToolCall(
                id=optional_field(tool, "toolUseId", str, where) or "",
                name=name,
                kind=SYSTEM_TOOLS.get(name),
                input=tool.get("input", {}),
                raw=tool,
            )
        )
    elif "toolResult" in block:
        raw = as_object(block["toolResult"], f"{where}.toolResult")
        result = _result(raw, {}, f"{where}.toolResult")
        _read_result(result, optional_field(raw, "content", list, where) or [])
        asm.add_block(result)
    elif "image" in block:
        image = as_object(block["image"], f"{where}.image")
        source = optional_field(image, "source", dict, f"{where}.image") or {}
        data = source.get("bytes")
        rest = {k: v for k, v in image.items() if k != "source"}
        asm.add_block(_image(rest, [data] if isinstance(data, str) else []))
    elif any(k in block for k in ("text", "reasoningContent")):
        return False
    else:
        asm.add_block(VendorContent(api=API, data=block))
    return True


class BlockReader:
    """The streamed blocks read here, by `contentBlockIndex`: `keys` are the indices whose
    deltas come here (the translator's fast path checks it before plain text)."""

    __slots__ = ("_asm", "_chunks", "_images", "_kind", "_names", "_side", "keys")

    def __init__(self, asm: Assembler) -> None:
        self._asm = asm
        self.keys: set[Hashable] = set()
        self._kind: dict[Hashable, str] = {}  # call | result | image | vendor
        self._names: dict[str, str] = {}  # server call id -> tool name
        self._images: dict[Hashable, dict[str, Any]] = {}
        self._chunks: dict[Hashable, list[str]] = {}
        self._side: dict[Hashable, Hashable] = {}
        """Index -> key of the VendorContent holding its unknown delta members."""

    def _open(self, key: Hashable, kind: str, block: Any) -> None:
        self.keys.add(key)
        self._kind[key] = kind
        if block is not None:
            self._asm.start_block(key, block)

    def start(self, key: Hashable, start: dict[str, Any], where: str) -> bool:
        """A `contentBlockStart`; False for a function call's (the translator's own)."""
        tool = optional_field(start, "toolUse", dict, where)
        result = optional_field(start, "toolResult", dict, where)
        image = optional_field(start, "image", dict, where)
        if tool is not None:
            where += ".toolUse"
            if optional_field(tool, "type", str, where) != "server_tool_use":
                return False
            name = optional_field(tool, "name", str, where) or ""
            call_id = optional_field(tool, "toolUseId", str, where) or ""
            self._names[call_id] = name
            kind = SYSTEM_TOOLS.get(name)
            call = ServerToolCall(id=call_id, name=name, kind=kind, raw=dict(tool))
            self._open(key, "call", call)
        elif result is not None:
            raw = {**result, "content": []}
            self._open(key, "result", _result(raw, self._names, f"{where}.toolResult"))
        elif image is not None:
            self._open(key, "image", None)
            self._images[key], self._chunks[key] = dict(image), []
        elif start:
            self._open(key, "vendor", VendorContent(api=API, data=dict(start)))
        else:
            return False
        return True

    def delta(self, key: Hashable, delta: dict[str, Any]) -> None:
        """A delta of a block read here, or the members of any delta the translator does
        not read (a citation, a kind this version does not know)."""
        kind = self._kind.get(key)
        where = "contentBlockDelta.delta"
        asm = self._asm
        for member, value in delta.items():
            if kind == "call" and member == "toolUse":
                part = as_object(value, f"{where}.toolUse")
                asm.block_input(key, optional_field(part, "input", str, where) or "")
            elif kind == "result" and member == "toolResult":
                block = asm.block(key)
                items = value if isinstance(value, list) else [value]
                if isinstance(block, ServerToolResult) and block.raw is not None:
                    block.raw["content"].extend(items)
                    _read_result(block, block.raw["content"])
            elif kind == "image" and member == "image":
                part = as_object(value, f"{where}.image")
                source = optional_field(part, "source", dict, f"{where}.image") or {}
                data = source.get("bytes")
                if isinstance(data, str):
                    self._chunks[key].append(data)
                _merge(self._images[key], {k: v for k, v in part.items() if k != "source"})
            elif kind == "vendor":
                block = asm.block(key)
                if isinstance(block, VendorContent):
                    _merge(block.data, {member: value})
            elif member == "citation" and kind is None:
                asm.cite(key, citation_of(as_object(value, f"{where}.citation"), where))
            else:
                self._aside(key, member, value)

    def _aside(self, key: Hashable, member: str, value: Any) -> None:
        side = self._side.get(key)
        block = self._asm.block(side) if side is not None else None
        if isinstance(block, VendorContent):
            _merge(block.data, {member: value})
            return
        side = ("bedrock.vendor", key)
        self._side[key] = side
        self._asm.start_block(side, VendorContent(api=API, data={member: value}))

    def stop(self, key: Hashable) -> None:
        """A `contentBlockStop` (the translator then ends the key)."""
        asm = self._asm
        side = self._side.pop(key, None)
        if side is not None:
            asm.end(side)
        kind = self._kind.pop(key, None)
        if kind is None:
            return
        self.keys.discard(key)
        if kind == "call":
            call = asm.block(key)
            asm.end(key)
            if isinstance(call, ServerToolCall) and call.raw is not None:
                call.raw = {**call.raw, "input": call.input}
        elif kind == "image":
            asm.add_block(_image(self._images.pop(key), self._chunks.pop(key)))

    def finish(self) -> None:
        """The message stopped: blocks still open end (an image is only added at its end)."""
        for key in [*self._kind, *self._side]:
            self.stop(key)


# --- as Converse streams them (for `vendor_bytes`) ---------------------------------------------


def stream_block(block: object) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A block of a `block_*` kind as Converse streams it: its `contentBlockStart.start`
    (None: it has none) and its `contentBlockDelta.delta`s; ValueError naming a block
    Converse cannot say (the translator reads each back to the same block)."""
    if isinstance(block, ServerToolCall):
        if block.kind != SYSTEM_TOOLS.get(block.name):
            raise ValueError(
                f"{API} says a server tool call only as one of Nova's system tools "
                f"({', '.join(SYSTEM_TOOLS)} with their kinds), not {block.name!r} of kind "
                f"{block.kind!r}"
            )
        start = {k: v for k, v in (block.raw or {}).items() if k != "input"}
        start.update(toolUseId=block.id, name=block.name, type="server_tool_use")
        arguments = json.dumps(block.input, ensure_ascii=False)
        return {"toolUse": start}, [{"toolUse": {"input": arguments}}]
    if isinstance(block, ServerToolResult):
        raw = block.raw or {}
        content = raw.get("content")
        if not isinstance(content, list):
            code = block.exit_code
            output = {
                "stdOut": block.text,
                "stdErr": "",
                "exitCode": code,
                "isError": block.is_error,
            }
            content = [{"json": output}] if code is not None else [{"text": block.text}]
        start = {k: v for k, v in raw.items() if k != "content"}
        start.update(toolUseId=block.call_id, status="error" if block.is_error else "success")
        if block.name and "type" not in start:
            start["type"] = f"{block.name}_result"
        return {"toolResult": start}, [{"toolResult": content}]
    if isinstance(block, FileContent):
        image = image_block(block, "a FileContent")["image"]
        return {"image": {"format": image["format"]}}, [{"image": {"source": image["source"]}}]
    if isinstance(block, VendorContent):
        data = _vendor(block, "a VendorContent")
        if not data or any(k in data for k in ("toolUse", "toolResult", "image")):
            raise ValueError(f"{API} would read the VendorContent {data!r} as a typed block")
        return data, []
    raise ValueError(f"{API} has no block for a {type(block).__name__}")


def usage_record(usage: dict[str, int], server_tools: dict[str, int]) -> dict[str, Any]:
    """Our usage counts as Converse's `metadata.usage` (server tools by Nova's names)."""
    out: dict[str, Any] = {theirs: usage.get(ours, 0) for ours, theirs in USAGE_FIELDS.items()}
    out["totalTokens"] = sum(out.values())
    if server_tools:
        out["serverToolUsage"] = {_SYSTEM_NAMES.get(k, k): n for k, n in server_tools.items()}
    return out
