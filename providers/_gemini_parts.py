"""Gemini's parts beyond text, thoughts and function calls, both ways: the one table the
translator reads them with, the request sends them back with, and `vendor_bytes` writes
them with (`stream_core/testing/_synthesize.py`).

Response side (what each becomes):

- `executableCode` -> `ServerToolCall(kind="code_execution", input={language, code})` and
  `codeExecutionResult` -> `ServerToolResult(text=output, is_error=outcome != OUTCOME_OK)`,
  answering the code part before it. Ids are the part's own `id` when Gemini sends one,
  else `<responseId>-<content index>` (stable across replays).
- Gemini 3 `toolCall` / `toolResponse` (a built-in tool the server ran: FILE_SEARCH,
  GOOGLE_SEARCH_WEB, URL_CONTEXT, ...) -> `ServerToolCall` / `ServerToolResult`, kind from
  `toolType` (`TOOL_KINDS`).
  Each of these keeps the part verbatim in `raw`, its `thoughtSignature` included.
- `inlineData` / `fileData` answers (a generated image) -> `FileContent(data | url,
  mime_type)`; a signature on such a part follows it as a `VendorContent` holding only
  `{"thoughtSignature": ...}`, which the request puts back on the part before it.
- A signature the text or thinking block it belongs to cannot hold (a trailing empty part
  after a server tool part, or a second signature on one block) -> `VendorContent` with
  the part verbatim. Any other part -> `VendorContent`: never skipped.
- `groundingMetadata` (candidate metadata, on the last chunk) -> citations on the text
  (`groundingSupports`: segment offsets are UTF-8 byte offsets into the candidate's whole
  answer text, mapped to code-point spans of the text block they fall in; `raw` = {support,
  chunk} verbatim) plus a derived pair: `ServerToolCall(name google_search | file_search |
  google_maps | grounding, input {queries: webSearchQueries})` and a `ServerToolResult`
  whose `sources` are the grounding chunks and whose `raw` is `{"groundingMetadata": ...}`
  verbatim: `searchEntryPoint.renderedContent` (the HTML Google requires shown with
  grounded answers) is read from there. The count of web search queries is
  `Usage.server_tools["web_search"]`.
- `urlContextMetadata` -> a derived `ServerToolCall(name url_context, kind web_fetch,
  input {urls})` + `ServerToolResult(sources = the URLs, text = each URL's retrieval
  status, raw = {"urlContextMetadata": ...})`.

Request side (`_gemini_messages`): every kept part goes back in the model turn as it
came (`raw` / `data`, signature included; a signature is dropped only for another model,
which cannot verify it). The derived grounding and URL-context blocks are not sent: they
are response metadata, and Gemini's request has no field for it (nor for citations).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from stream_core import (
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    Source,
    TextContent,
    VendorContent,
)
from stream_core.provider import Assembler, as_object, optional_field

__all__ = [
    "API",
    "RESPONSE_METADATA",
    "SIGNATURE",
    "PartReader",
    "append_part",
    "candidate_metadata",
    "encode_block",
    "encode_grounding",
    "file_part",
]

API = "google-generative-ai"
_PART = "chunk.candidates[0].content.parts[]"
_GROUNDING = "groundingMetadata"
_URL_CONTEXT = "urlContextMetadata"
RESPONSE_METADATA = (_GROUNDING, _URL_CONTEXT)
"""Keys of a derived result's `raw`: candidate metadata, never sent back."""
SIGNATURE = "thoughtSignature"

TOOL_KINDS: dict[str, str] = {
    "GOOGLE_SEARCH": "web_search",
    "GOOGLE_SEARCH_WEB": "web_search",
    "GOOGLE_SEARCH_IMAGE": "web_search",
    "URL_CONTEXT": "web_fetch",
    "FILE_SEARCH": "file_search",
    "CODE_EXECUTION": "code_execution",
}
"""Gemini 3 `toolCall.toolType` -> portable kind (others: no kind, name kept)."""

_CODE = "code_execution"
_OK = "OUTCOME_OK"
_URL_OK = "URL_RETRIEVAL_STATUS_SUCCESS"

# --- response ------------------------------------------------------------------------------


def _str(obj: Any, key: str) -> str | None:
    value = obj.get(key) if type(obj) is dict else None
    return value if type(value) is str else None


class PartReader:
    """The translator's reading of server-tool, file and unknown parts, and of the
    candidate's grounding and URL-context metadata (applied when the candidate ends)."""

    __slots__ = ("asm", "grounding", "last_call", "url_context")

    def __init__(self, asm: Assembler) -> None:
        self.asm = asm
        self.last_call: str | None = None  # the latest server call, for its result
        self.grounding: dict[str, Any] | None = None
        self.url_context: dict[str, Any] | None = None

    def _derived_id(self) -> str:
        return f"{self.asm.message.response_id or 'gemini'}-{len(self.asm.message.content)}"

    def part(self, part: dict[str, Any]) -> None:
        """A part that is neither text nor a function call (the text around it ended)."""
        if "executableCode" in part:
            self._code(part)
        elif "codeExecutionResult" in part:
            self._code_result(part)
        elif "toolCall" in part:
            self._tool_call(part)
        elif "toolResponse" in part:
            self._tool_response(part)
        elif ("inlineData" in part or "fileData" in part) and not part.get("thought"):
            self._file(part)
        else:
            self.keep(part)

    def keep(self, part: dict[str, Any]) -> None:
        """A part kept as the vendor sent it."""
        self.asm.add_block(VendorContent(api=API, data=part))

    def _code(self, part: dict[str, Any]) -> None:
        where = _PART + ".executableCode"
        code = as_object(part["executableCode"], where)
        call_id = optional_field(code, "id", str, where) or self._derived_id()
        given = {
            "language": optional_field(code, "language", str, where),
            "code": optional_field(code, "code", str, where),
        }
        self.last_call = call_id
        self.asm.add_block(
            ServerToolCall(
                id=call_id,
                name=_CODE,
                kind=_CODE,
                input={k: v for k, v in given.items() if v is not None},
                raw=part,
            )
        )

    def _code_result(self, part: dict[str, Any]) -> None:
        where = _PART + ".codeExecutionResult"
        result = as_object(part["codeExecutionResult"], where)
        outcome = optional_field(result, "outcome", str, where)
        output = optional_field(result, "output", str, where)
        is_error = outcome is not None and outcome != _OK
        call_id = optional_field(result, "id", str, where) or self.last_call
        self.asm.add_block(
            ServerToolResult(
                call_id=call_id or self._derived_id(),
                name=_CODE,
                kind=_CODE,
                is_error=is_error,
                text=output if output is not None else (outcome or "") if is_error else "",
                raw=part,
            )
        )

    def _tool_call(self, part: dict[str, Any]) -> None:
        where = _PART + ".toolCall"
        call = as_object(part["toolCall"], where)
        tool_type = optional_field(call, "toolType", str, where)
        call_id = optional_field(call, "id", str, where) or self._derived_id()
        args = optional_field(call, "args", dict, where)
        self.last_call = call_id
        self.asm.add_block(
            ServerToolCall(
                id=call_id,
                name=tool_type.lower() if tool_type else "tool",
                kind=TOOL_KINDS.get(tool_type or ""),
                input=args or {},
                raw=part,
            )
        )

    def _tool_response(self, part: dict[str, Any]) -> None:
        where = _PART + ".toolResponse"
        response = as_object(part["toolResponse"], where)
        tool_type = optional_field(response, "toolType", str, where)
        call_id = optional_field(response, "id", str, where) or self.last_call
        body = response.get("response")
        text = json.dumps(body, ensure_ascii=False) if body is not None else ""
        self.asm.add_block(
            ServerToolResult(
                call_id=call_id or self._derived_id(),
                name=tool_type.lower() if tool_type else "tool",
                kind=TOOL_KINDS.get(tool_type or ""),
                text=text,
                raw=part,
            )
        )

    def _file(self, part: dict[str, Any]) -> None:
        signature = part.get(SIGNATURE)
        inline, ref = part.get("inlineData"), part.get("fileData")
        known = {"inlineData", "fileData", SIGNATURE}
        data = _str(inline, "data")
        url = _str(ref, "fileUri")
        if (
            set(part) - known
            or (data is None and url is None)
            or (signature is not None and type(signature) is not str)
        ):
            self.keep(part)  # a shape FileContent cannot hold whole
            return
        mime = _str(inline, "mimeType") if data is not None else _str(ref, "mimeType")
        if data is not None:
            self.asm.add_block(FileContent(data=data, mime_type=mime))
        else:
            self.asm.add_block(FileContent(url=url, mime_type=mime))
        if signature:
            self.keep({SIGNATURE: signature})  # goes back on the part before it

    # --- candidate metadata --------------------------------------------------------------

    def metadata(self, candidate: dict[str, Any]) -> None:
        """Note a candidate's grounding / URL-context metadata (a later chunk's fields
        replace an earlier one's); applied by `finish`."""
        grounding = candidate.get(_GROUNDING)
        if type(grounding) is dict and grounding:
            self.grounding = {**(self.grounding or {}), **grounding}
        url_context = candidate.get(_URL_CONTEXT)
        if type(url_context) is dict and url_context:
            self.url_context = {**(self.url_context or {}), **url_context}

    def finish(self) -> None:
        grounding, url_context = self.grounding, self.url_context
        self.grounding = self.url_context = None
        if grounding is not None:
            self._grounding(grounding)
        if url_context is not None:
            self._url_context(url_context)

    def _grounding(self, metadata: dict[str, Any]) -> None:
        asm = self.asm
        chunks = metadata.get("groundingChunks")
        chunks = chunks if type(chunks) is list else []
        queries = metadata.get("webSearchQueries")
        queries = [q for q in queries if type(q) is str] if type(queries) is list else []
        sources: list[Source] = []
        texts: list[str] = []
        kinds: list[str] = []
        for chunk in chunks:
            source, kind, text = _chunk_source(chunk)
            sources.append(source)
            kinds.append(kind)
            if text:
                texts.append(text)
        supports = metadata.get("groundingSupports")
        if type(supports) is list and supports:
            _cite(asm, supports, chunks)
        kind = "web_search" if queries else next(iter(kinds), "grounding")
        name = {"web_search": "google_search", "file_search": "file_search"}.get(kind, kind)
        call_id = f"{asm.message.response_id or 'gemini'}-grounding"
        portable = kind if kind in ("web_search", "file_search") else None
        asm.add_block(
            ServerToolCall(
                id=call_id, name=name, kind=portable, input={"queries": queries} if queries else {}
            )
        )
        asm.add_block(
            ServerToolResult(
                call_id=call_id,
                name=name,
                kind=portable,
                sources=sources,
                text="\n\n".join(texts),
                raw={_GROUNDING: metadata},
            )
        )
        if queries:
            asm.set_server_tools({"web_search": len(queries)})

    def _url_context(self, metadata: dict[str, Any]) -> None:
        asm = self.asm
        entries = metadata.get("urlMetadata")
        entries = entries if type(entries) is list else []
        urls: list[str] = []
        lines: list[str] = []
        failed = 0
        for entry in entries:
            url = _str(entry, "retrievedUrl")
            status = _str(entry, "urlRetrievalStatus") or ""
            if url:
                urls.append(url)
            lines.append(f"{url or '?'}: {status}")
            failed += status != _URL_OK
        call_id = f"{asm.message.response_id or 'gemini'}-url_context"
        asm.add_block(
            ServerToolCall(id=call_id, name="url_context", kind="web_fetch", input={"urls": urls})
        )
        asm.add_block(
            ServerToolResult(
                call_id=call_id,
                name="url_context",
                kind="web_fetch",
                is_error=bool(entries) and failed == len(entries),
                text="\n".join(lines),
                sources=[Source(url=u) for u in urls],
                raw={_URL_CONTEXT: metadata},
            )
        )


def _chunk_source(chunk: Any) -> tuple[Source, str, str | None]:
    """A grounding chunk as a source, its kind, and the retrieved text it carries."""
    for key, kind in (("web", "web_search"), ("retrievedContext", "file_search")):
        inner = chunk.get(key) if type(chunk) is dict else None
        if type(inner) is dict:
            text = _str(inner, "text")
            url = _str(inner, "uri") or _metadata_url(inner.get("customMetadata"))
            return Source(url=url, title=_str(inner, "title"), text=text), kind, text
    inner = chunk.get("maps") if type(chunk) is dict else None
    if type(inner) is dict:
        return Source(url=_str(inner, "uri"), title=_str(inner, "title")), "google_maps", None
    return Source(), "grounding", None


def _metadata_url(entries: Any) -> str | None:
    """A file-search chunk's page: the `source_url` (or `url`) of its document's
    `customMetadata` (`[{key, stringValue}]`), when the chunk has no `uri`."""
    for entry in entries if type(entries) is list else ():
        if _str(entry, "key") in ("source_url", "url") and _str(entry, "stringValue"):
            return _str(entry, "stringValue")
    return None


def _cite(asm: Assembler, supports: list[Any], chunks: list[Any]) -> None:
    """Each grounding support as citations on the text block its byte span falls in."""
    content = asm.message.content
    blocks: list[tuple[int, str, bytes, int]] = []  # (content index, text, utf-8, byte start)
    at = 0
    for i, block in enumerate(content):
        if isinstance(block, TextContent) and block.text:
            data = block.text.encode("utf-8", "surrogatepass")
            blocks.append((i, block.text, data, at))
            at += len(data)
    if not blocks:
        return
    for support in supports:
        if type(support) is not dict:
            continue
        segment = support.get("segment")
        segment = segment if type(segment) is dict else {}
        start, end = segment.get("startIndex", 0), segment.get("endIndex")
        said = _str(segment, "text")
        if type(start) is not int or type(end) is not int:
            continue
        found = _span(blocks, start, end, said)
        if found is None:
            continue
        index, first, last = found
        indices = support.get("groundingChunkIndices")
        indices = [n for n in indices if type(n) is int] if type(indices) is list else []
        for n in indices or [None]:
            chunk = chunks[n] if n is not None and 0 <= n < len(chunks) else None
            source = _chunk_source(chunk)[0] if chunk is not None else Source()
            raw: dict[str, Any] = {"support": support}
            if chunk is not None:
                raw["chunk"] = chunk
            asm.cite_at(
                index,
                Citation(
                    url=source.url,
                    title=source.title,
                    cited_text=said,
                    start=first,
                    end=last,
                    raw=raw,
                ),
            )


def _span(
    blocks: list[tuple[int, str, bytes, int]], start: int, end: int, said: str | None
) -> tuple[int, int, int] | None:
    """(content index, code-point start, end) of a byte span of the whole answer text;
    when the bytes do not give the segment's own text, where that text is in a block."""
    for index, text, data, at in blocks:
        if at <= start < at + len(data):
            first = len(data[: start - at].decode("utf-8", "ignore"))
            last = len(data[: min(end, at + len(data)) - at].decode("utf-8", "ignore"))
            if not said or text[first:last] == said:
                return index, first, last
            break
    if said:
        for index, text, _, _ in blocks:
            pos = text.find(said)
            if pos >= 0:
                return index, pos, pos + len(said)
    return None


# --- request -------------------------------------------------------------------------------


def file_part(block: FileContent) -> dict[str, Any]:
    """A file as Gemini takes it: bytes inline, else a reference (an uploaded file's URI,
    given as `url` or `file_id`)."""
    if block.data is not None:
        mime = block.mime_type or "application/octet-stream"
        return {"inlineData": {"mimeType": mime, "data": block.data}}
    ref: dict[str, Any] = {}
    if block.mime_type:
        ref["mimeType"] = block.mime_type
    ref["fileUri"] = block.url or block.file_id
    return {"fileData": ref}


# --- vendor bytes (stream_core.testing) ----------------------------------------------------

_METADATA_KINDS = ("web_search", "file_search", "web_fetch")
"""Kinds whose raw-less blocks are written as candidate metadata, not parts."""


def encode_block(block: object) -> dict[str, Any] | None:
    """The part a scripted block is streamed as (None: it is candidate metadata, written
    by `candidate_metadata`)."""
    if isinstance(block, ServerToolCall | ServerToolResult):
        if block.raw is not None:
            return None if any(k in block.raw for k in RESPONSE_METADATA) else block.raw
        if block.kind in _METADATA_KINDS:
            return None
        if isinstance(block, ServerToolCall):
            given = block.input if isinstance(block.input, dict) else {}
            if block.kind == _CODE:
                # As scripted (`_gemini_script` refuses other fields): no language invented.
                code = {k: given[k] for k in ("language", "code") if k in given}
                return {"executableCode": {**code, "id": block.id}}
            tool_type = block.name.upper() or "TOOL"
            return {"toolCall": {"toolType": tool_type, "id": block.id, "args": given}}
        if block.kind == _CODE:
            outcome = "OUTCOME_FAILED" if block.is_error else _OK
            result = {"outcome": outcome, "output": block.text, "id": block.call_id}
            return {"codeExecutionResult": result}
        reply: dict[str, Any] = {"toolType": block.name.upper() or "TOOL", "id": block.call_id}
        if block.text:
            reply["response"] = json.loads(block.text)  # `_gemini_script` checked it is JSON
        return {"toolResponse": reply}
    if isinstance(block, FileContent):
        return file_part(block)
    if isinstance(block, VendorContent):
        return block.data
    return None


def append_part(parts: list[dict[str, Any]], part: dict[str, Any]) -> None:
    """Add a part to a turn being written; a signature kept alone goes back on the part
    before it (as the request does)."""
    if set(part) == {SIGNATURE} and parts and SIGNATURE not in parts[-1]:
        parts[-1] = {**parts[-1], **part}
    else:
        parts.append(part)


def candidate_metadata(
    blocks: Sequence[object], texts: Sequence[tuple[str, Sequence[Citation]]]
) -> dict[str, Any]:
    """The candidate's `groundingMetadata` / `urlContextMetadata` for a scripted turn: the
    vendor's own where a result kept it, else written from the text's citations and the
    raw-less search and fetch blocks."""
    out: dict[str, Any] = {}
    queries: list[str] = []
    sources: list[Source] = []
    fetched: list[tuple[str, bool]] = []
    for b in blocks:
        if not isinstance(b, ServerToolCall | ServerToolResult):
            continue
        if b.raw is not None:
            for key in RESPONSE_METADATA:
                if isinstance(b, ServerToolResult) and type(b.raw.get(key)) is dict:
                    out[key] = b.raw[key]
            continue
        if isinstance(b, ServerToolCall) and b.kind in ("web_search", "file_search"):
            given = b.input if isinstance(b.input, dict) else {}
            asked = given.get("queries", given.get("query"))
            queries += [asked] if type(asked) is str else [q for q in asked or [] if type(q) is str]
        elif isinstance(b, ServerToolResult) and b.kind in ("web_search", "file_search"):
            sources += b.sources
        elif isinstance(b, ServerToolResult) and b.kind == "web_fetch":
            fetched += [(s.url, b.is_error) for s in b.sources if s.url]
    if _GROUNDING not in out:
        grounding = encode_grounding(texts, queries, sources)
        if grounding is not None:
            out[_GROUNDING] = grounding
    if _URL_CONTEXT not in out and fetched:
        status = {False: _URL_OK, True: "URL_RETRIEVAL_STATUS_ERROR"}
        entries = [{"retrievedUrl": u, "urlRetrievalStatus": status[bad]} for u, bad in fetched]
        out[_URL_CONTEXT] = {"urlMetadata": entries}
    return out


def encode_grounding(
    texts: Sequence[tuple[str, Sequence[Citation]]],
    queries: Sequence[str] = (),
    sources: Sequence[Source] = (),
) -> dict[str, Any] | None:
    """`groundingMetadata` for answer texts (in order) with their citations: chunks from
    the sources and the citations' pages, supports at the UTF-8 byte offsets of the spans."""
    chunks: list[dict[str, Any]] = []
    seen: dict[tuple[str | None, str | None], int] = {}

    def chunk(url: str | None, title: str | None) -> int:
        if (url, title) not in seen:
            seen[url, title] = len(chunks)
            web = {k: v for k, v in (("uri", url), ("title", title)) if v is not None}
            chunks.append({"web": web})
        return seen[url, title]

    for source in sources:
        chunk(source.url, source.title)
    supports: list[dict[str, Any]] = []
    at = 0
    for text, citations in texts:
        for c in citations:
            first = min(c.start if c.start is not None else 0, len(text))
            last = min(c.end if c.end is not None else len(text), len(text))
            start = at + len(text[:first].encode("utf-8"))
            segment: dict[str, Any] = {
                "startIndex": start,
                "endIndex": start + len(text[first:last].encode("utf-8")),
            }
            if c.cited_text is not None:  # else read back with none
                segment["text"] = text[first:last]
            indices = [chunk(c.url, c.title)]
            supports.append({"segment": segment, "groundingChunkIndices": indices})
        at += len(text.encode("utf-8"))
    if not (supports or queries or chunks):
        return None
    out: dict[str, Any] = {}
    if queries:
        out["webSearchQueries"] = list(queries)
    if chunks:
        out["groundingChunks"] = chunks
    if supports:
        out["groundingSupports"] = supports
    return out
