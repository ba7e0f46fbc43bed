"""What the Chat Completions family sends beyond text, reasoning and function calls, read
into blocks and written back: the one table both the translator (`ChatExtras`) and the
encoders (`vendor_bytes`, the request builders) use.

- Citations. Perplexity: top-level `citations` (URLs) and `search_results` (`{title, url,
  date}`), repeated on every chunk, for the `[n]` markers (1-based) in the text: one
  `Citation` per marker found (its span is the marker's), and every source never marked
  still attached to the text with no span, so none is lost. OpenAI / OpenRouter:
  `annotations` of type `url_citation` (`{url, title, start_index, end_index}`, offsets into
  the message's text) on the delta or the whole message. Mistral: `reference` chunks
  (`reference_ids` into the sources a tool returned) in a content list.
- Files: OpenRouter's `delta.images` (`image_url` data URLs) -> `FileContent`.
- Server-run tools: Groq's `executed_tools` -> `ServerToolCall` + `ServerToolResult`.
- Usage: Perplexity `num_search_queries`, OpenRouter `server_tool_use.web_search_requests`
  -> `Usage.server_tools["web_search"]`.
- Anything else with a value, in a delta or among Perplexity's top-level extras
  (`related_questions`, `images`, `videos`), is kept verbatim as `VendorContent`.

Going back: Chat Completions has no request field for any of these on an assistant
message (citations included: the vendor wrote them, and the plain text is what it takes),
so the request builders send the text alone and the rest as its `as_text()`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
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
from stream_core.provider import Assembler, optional_field

__all__ = [
    "KNOWN_DELTA_FIELDS",
    "ChatExtras",
    "annotation_of",
    "block_delta",
    "citations_delta",
    "file_part",
    "mistral_file_part",
    "reference_chunk",
    "reference_citations",
    "reference_parts",
    "server_tool_counts",
]

KNOWN_DELTA_FIELDS = frozenset(
    (
        "role",
        "content",
        "refusal",
        "tool_calls",
        "reasoning_content",
        "reasoning",
        "reasoning_text",
        "reasoning_details",
        "thinking_blocks",
        "name",
        # Framing, not content: the choice's position repeated (some Mistral-compatible
        # servers) and gpt-oss's Harmony channel (`analysis` / `final`) that the reasoning
        # or content field already says.
        "index",
        "channel",
    )
)
"""Delta (and whole-message) fields the translator reads itself or that carry no content;
a delta with any other field goes through `ChatExtras.delta`."""

RESPONSE_FIELDS = ("related_questions", "images", "videos")
"""Perplexity's top-level response extras, kept whole (the last chunk's) as VendorContent."""

# Groq's `executed_tools[].type` -> portable kind (None: a tool with no portable kind).
_GROQ_KINDS: dict[str, str] = {
    "search": "web_search",
    "web_search": "web_search",
    "visit": "web_fetch",
    "python": "code_execution",
    "code_interpreter": "code_execution",
    "browser_automation": "web_fetch",
}


class ChatExtras:
    """One stream's reading of the extras (module docstring). `delta` runs only for deltas
    with a field outside `KNOWN_DELTA_FIELDS`; `top_level` only for the first, a finishing
    and a usage chunk; `settle` once, when the answer is complete."""

    __slots__ = ("_citations", "_meta", "_search", "_seen", "_tools", "_vendor", "api", "asm")

    def __init__(self, asm: Assembler, api: str) -> None:
        self.asm = asm
        self.api = api
        self._citations: list[Any] = []
        self._search: list[Any] = []
        self._meta: dict[str, Any] = {}
        self._seen: set[str] = set()
        self._tools: dict[Hashable, tuple[ServerToolCall, bool]] = {}
        self._vendor: dict[str, VendorContent] = {}

    # --- the chunk's own fields -------------------------------------------------------------

    def top_level(self, chunk: dict[str, Any]) -> None:
        """Perplexity's sources and extras: every chunk repeats them, the last one wins."""
        citations = chunk.get("citations")
        if type(citations) is list and citations:
            self._citations = citations
        search = chunk.get("search_results")
        if type(search) is list and search:
            self._search = search
        for name in RESPONSE_FIELDS:
            value = chunk.get(name)
            if value:
                self._meta[name] = value

    # --- delta fields -------------------------------------------------------------------------

    def delta(self, delta: dict[str, Any]) -> None:
        for name, value in delta.items():
            if name in KNOWN_DELTA_FIELDS or value is None or value in ("", [], {}):
                continue
            handler = _HANDLERS.get(name)
            if handler is not None and handler(self, value):
                continue
            self._keep(name, value)

    def _keep(self, name: str, value: Any) -> None:
        """An unknown field, kept verbatim: fragments of one field merge into one block
        (strings concatenated, lists extended, objects updated)."""
        block = self._vendor.get(name)
        if block is None:
            block = VendorContent(api=self.api, data={name: value})
            self._vendor[name] = block
            self.asm.add_block(block)
            return
        old = block.data.get(name)
        if isinstance(old, str) and isinstance(value, str):
            block.data[name] = old + value
        elif isinstance(old, list) and isinstance(value, list):
            old.extend(value)
        elif isinstance(old, dict) and isinstance(value, dict):
            old.update(value)
        else:
            block.data[name] = value

    def keep_part(self, part: dict[str, Any]) -> None:
        """A typed content part (Mistral chunk) of a type not read: kept verbatim, after
        the text before it."""
        self._end_text()
        self.asm.add_block(VendorContent(api=self.api, data=part))

    def annotations(self, value: Any) -> bool:
        if type(value) is not list:
            return False
        for item in value:
            if type(item) is not dict:
                continue
            key = json.dumps(item, sort_keys=True, default=str)
            if key in self._seen:
                continue  # a server repeating what it sent
            self._seen.add(key)
            citation = annotation_of(item)
            if citation is None:
                self.asm.add_block(VendorContent(api=self.api, data=item))
            else:
                self._cite_span(citation)
        return True

    def images(self, value: Any) -> bool:
        if type(value) is not list:
            return False
        for item in value:
            image = item.get("image_url") if type(item) is dict else None
            url = image.get("url") if type(image) is dict else image
            if type(url) is not str or not url:
                self.asm.add_block(VendorContent(api=self.api, data={"images": [item]}))
                continue
            self._end_text()
            self.asm.add_block(file_of_url(url))
        return True

    def executed_tools(self, value: Any) -> bool:
        """Groq's server-run tools: an entry per call (by `index`), sent again with its
        `output` when the call is done."""
        if type(value) is not list:
            return False
        asm = self.asm
        for position, item in enumerate(value):
            if type(item) is not dict:
                continue
            index = item.get("index")
            key: Hashable = index if type(index) is int else ("at", position)
            kept = self._tools.get(key)
            tool_type = optional_field(item, "type", str, "delta.executed_tools[]") or ""
            kind = _GROQ_KINDS.get(tool_type)
            if kept is None:
                # Groq's reasoning narrates the call as it runs: it stays one block, open
                # around the call; only text before the call is complete.
                asm.end("text")
                arguments = item.get("arguments")
                parsed: Any = arguments
                if type(arguments) is str:
                    try:
                        parsed = json.loads(arguments) if arguments else {}
                    except ValueError:
                        parsed = arguments
                call = ServerToolCall(
                    id=f"executed_tool_{key if type(key) is int else position}",
                    name=tool_type,
                    kind=kind,
                    input=parsed if parsed is not None else {},
                    raw=item,
                )
                asm.add_block(call)
                kept = (call, False)
            call, done = kept
            output = item.get("output")
            if not done and output is not None:
                asm.end("text")
                asm.add_block(
                    ServerToolResult(
                        call_id=call.id,
                        name=tool_type,
                        kind=kind,
                        text=output if type(output) is str else json.dumps(output, default=str),
                        sources=_groq_sources(item.get("search_results")),
                        raw=item,
                    )
                )
                done = True
            self._tools[key] = (call, done)
        return True

    # --- the end --------------------------------------------------------------------------------

    def settle(self) -> None:
        """Perplexity's sources on the text, and its extras as blocks: once."""
        if self._citations or self._search:
            self._marked()
            self._citations, self._search = [], []
        for name, value in self._meta.items():
            self.asm.add_block(VendorContent(api=self.api, data={name: value}))
        self._meta.clear()

    def _marked(self) -> None:
        asm = self.asm
        texts = [
            (i, b.text) for i, b in enumerate(asm.message.content) if isinstance(b, TextContent)
        ]
        for n in range(max(len(self._citations), len(self._search))):
            url = self._citations[n] if n < len(self._citations) else None
            entry = self._search[n] if n < len(self._search) else None
            entry = entry if type(entry) is dict else None
            if type(url) is not str:
                url = entry.get("url") if entry is not None else None
                url = url if type(url) is str else None
            title = None
            if entry is not None and entry.get("url") in (url, None):
                title = entry.get("title") if type(entry.get("title")) is str else None
            else:
                entry = None
            if url is None and entry is None:
                continue
            marker = f"[{n + 1}]"
            raw = entry if entry is not None else {"marker": marker, "url": url}
            found = False
            for index, text in texts:
                at = text.find(marker)
                while at != -1:
                    found = True
                    end = at + len(marker)
                    cite = Citation(url=url, title=title or None, start=at, end=end, raw=raw)
                    asm.cite_at(index, cite)
                    at = text.find(marker, end)
            if not found:  # a source the text never marked: kept on the whole answer
                self._cite_whole(Citation(url=url, title=title or None, raw=raw))

    # --- helpers ----------------------------------------------------------------------------------

    def _end_text(self) -> None:
        """A block after text: the text before it is complete (later text is a new block)."""
        self.asm.end("text")
        self.asm.end("thinking")

    def _cite_whole(self, citation: Citation) -> None:
        asm = self.asm
        if asm.is_open("text"):
            asm.cite("text", citation)
            return
        content = asm.message.content
        last = next((i for i in range(len(content) - 1, -1, -1) if _is_text(content[i])), None)
        if last is None or not asm.cite_at(last, citation):
            asm.cite("text", citation)  # no text (yet): a block that holds it

    def _cite_span(self, citation: Citation) -> None:
        """A citation whose span counts in the whole message's text (all its text blocks
        in order): attached to the block the span starts in, counted from that block."""
        start, end = citation.start, citation.end
        if start is None or end is None:
            self._cite_whole(citation)
            return
        offset = 0
        for i, block in enumerate(self.asm.message.content):
            if not isinstance(block, TextContent):
                continue
            size = len(block.text)
            if start < offset + size:
                local = citation.model_copy(
                    update={"start": start - offset, "end": min(end - offset, size)}
                )
                self.asm.cite_at(i, local)
                return
            offset += size
        self._cite_whole(citation.model_copy(update={"start": None, "end": None}))


def _is_text(block: object) -> bool:
    return isinstance(block, TextContent)


_HANDLERS: dict[str, Callable[[ChatExtras, Any], bool]] = {
    "annotations": ChatExtras.annotations,
    "images": ChatExtras.images,
    "executed_tools": ChatExtras.executed_tools,
}
"""Delta fields with a typed reading; a handler returns False for a value it cannot read,
which is then kept verbatim."""


def _groq_sources(value: Any) -> list[Source]:
    results = value.get("results") if type(value) is dict else value
    out: list[Source] = []
    for r in results if type(results) is list else ():
        if type(r) is not dict:
            continue
        score = r.get("score")
        out.append(
            Source(
                url=r.get("url") if type(r.get("url")) is str else None,
                title=r.get("title") if type(r.get("title")) is str else None,
                text=r.get("content") if type(r.get("content")) is str else None,
                score=float(score) if isinstance(score, (int, float)) else None,
            )
        )
    return out


def server_tool_counts(usage: dict[str, Any]) -> dict[str, int] | None:
    """Server-tool counts in a usage object (Perplexity, OpenRouter), or None."""
    n = usage.get("num_search_queries")
    if type(n) is not int:
        tools = usage.get("server_tool_use")
        n = tools.get("web_search_requests") if type(tools) is dict else None
    return {"web_search": n} if type(n) is int else None


# --- citations, both ways --------------------------------------------------------------------


def annotation_of(item: dict[str, Any]) -> Citation | None:
    """A `url_citation` annotation as a Citation (None for any other annotation). Its
    span is in the message's text; a zero or missing span (OpenRouter sends 0, 0) is the
    whole text."""
    if item.get("type") != "url_citation":
        return None
    inner = item.get("url_citation")
    if type(inner) is not dict:
        return None
    url, title = inner.get("url"), inner.get("title")
    start, end = inner.get("start_index"), inner.get("end_index")
    span = type(start) is int and type(end) is int and 0 <= start < end
    return Citation(
        url=url if type(url) is str else None,
        title=title if type(title) is str and title else None,
        start=start if span else None,
        end=end if span else None,
        raw=item,
    )


def url_annotation(citation: Citation, offset: int = 0) -> dict[str, Any]:
    """A Citation as the `url_citation` annotation a Chat Completions server sends (its
    `raw` where it is one: a Responses annotation, flat, is not), its span counted from
    `offset` in the message's text."""
    if citation.raw is not None and type(citation.raw.get("url_citation")) is dict:
        return citation.raw
    if citation.url is None:
        raise ValueError(
            "vendor_bytes: openai-completions cites by URL only; the citation "
            f"{citation.label()!r} has none"
        )
    inner: dict[str, Any] = {"url": citation.url, "title": citation.title or ""}
    if citation.start is not None and citation.end is not None:
        inner["start_index"] = citation.start + offset
        inner["end_index"] = citation.end + offset
    return {"type": "url_citation", "url_citation": inner}


def reference_citations(chunk: dict[str, Any], start: int, end: int) -> list[Citation]:
    """A Mistral `reference` chunk as Citations, one per reference id (the index of the
    source in what the tool returned), for the text from `start` to `end` (the text since
    the previous reference)."""
    ids = chunk.get("reference_ids")
    span = start < end
    return [
        Citation(
            document_index=i,
            start=start if span else None,
            end=end if span else None,
            raw=chunk,
        )
        for i in (ids if type(ids) is list else ())
        if type(i) is int
    ]


def reference_chunk(citations: list[Citation]) -> dict[str, Any]:
    """Citations read from one `reference` chunk, as that chunk (its `raw`), else made."""
    raw = citations[0].raw
    if raw is not None and raw.get("type") == "reference":
        return raw
    ids = [c.document_index for c in citations]
    if any(i is None for i in ids):
        raise ValueError(
            "mistral-conversations cites sources by their index (Citation.document_index); "
            f"{citations[0].label()!r} has none"
        )
    return {"type": "reference", "reference_ids": ids}


def reference_parts(text: str, citations: list[Citation]) -> list[dict[str, Any]]:
    """Mistral content chunks for cited text: the text cut where each `reference` chunk
    stood (the end of its citations' span; the end of the text for one without a span)
    and the chunk put there, as the model wrote them."""
    groups: dict[tuple[int, str], tuple[int, list[Citation]]] = {}
    for n, c in enumerate(citations):
        # One reference chunk became one citation per id, each with that chunk as `raw`.
        # A whole-block citation: a chunk before the text (it reads back without a span).
        at = c.end if c.end is not None else 0
        raw = json.dumps(c.raw, sort_keys=True) if c.raw is not None else f"#{n}"
        groups.setdefault((at, raw), (at, []))[1].append(c)
    parts: list[dict[str, Any]] = []
    done = 0
    for at, cited in sorted(groups.values(), key=lambda g: g[0]):
        if at > done:
            parts.append({"type": "text", "text": text[done:at]})
            done = at
        parts.append(reference_chunk(cited))
    if done < len(text):
        parts.append({"type": "text", "text": text[done:]})
    return parts


# --- files -------------------------------------------------------------------------------------


def file_of_url(url: str) -> FileContent:
    """An image or file a server sent as a URL: a `data:` URL becomes its bytes."""
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return FileContent(data=data, mime_type=head or None)
    return FileContent(url=url)


def file_part(block: FileContent, api: str) -> dict[str, Any]:
    """A user FileContent as Chat Completions' `file` content part (base64 data as a data
    URL, or an uploaded file's id). Chat Completions documents no file by URL."""
    file: dict[str, Any] = {}
    if block.file_id is not None:
        file["file_id"] = block.file_id
    elif block.data is not None:
        file["file_data"] = f"data:{block.mime_type};base64,{block.data}"
    else:
        raise ValueError(
            f"{api}: a FileContent given by URL only ({block.url}) cannot be sent: the chat "
            "`file` part takes base64 data or a file_id"
        )
    if block.name:
        file["filename"] = block.name
    return {"type": "file", "file": file}


def mistral_file_part(block: FileContent) -> dict[str, Any]:
    """A user FileContent as a Mistral chunk: `document_url` (a URL, or a base64 PDF as a
    `data:application/pdf;base64,` URL) or `file` (an uploaded file's id)."""
    if block.file_id is not None:
        return {"type": "file", "file_id": block.file_id}
    if block.url is not None:
        url = block.url
    else:
        url = f"data:{block.mime_type};base64,{block.data}"
    part: dict[str, Any] = {"type": "document_url", "document_url": url}
    if block.name:
        part["document_name"] = block.name
    return part


# --- scripted turns as vendor bytes (`vendor_bytes`) -------------------------------------------


def citations_delta(text: str, citations: list[Citation], api: str, offset: int) -> dict[str, Any]:
    """A cited text block as the delta that says it: Mistral's text and `reference`
    chunks; elsewhere the text's `url_citation` annotations (spans counted from `offset`,
    the length of the message's text before this block), sent after the text."""
    for c in citations:
        if c.raw is None:
            _check_said(c, api, len(text))
    if api == "mistral-conversations":
        parts = reference_parts(text, citations)
        _check_spans(parts, citations)
        return {"content": parts}
    return {"annotations": [url_annotation(c, offset) for c in citations]}


_SAID = {
    "openai-completions": ("url", "title", "start", "end"),  # url_citation
    "mistral-conversations": ("document_index", "start", "end"),  # reference chunk
}
"""What a scripted citation (no `raw`) can carry in each API's annotation or chunk."""


def _check_said(c: Citation, api: str, size: int) -> None:
    """Raise, naming the field, for what the API's citation has no field for (a
    `url_citation` has no cited text, file or document; a Mistral `reference` chunk cites a
    document by index alone), or a span it reads back otherwise (an empty one)."""
    said = _SAID[api]
    for name, value in c.model_dump(exclude={"raw"}).items():
        if value is not None and name not in said:
            raise ValueError(
                f"vendor_bytes: {api} has no field for a citation's `{name}` (it says "
                f"{', '.join(said)}); leave it unset or give the vendor's `raw`"
            )
    if (c.start is None) != (c.end is None) or (c.start is not None and c.start >= (c.end or 0)):
        raise ValueError(
            f"vendor_bytes: {api} reads a citation's span as start < end or none "
            f"(start {c.start}, end {c.end}; the text has {size} code points)"
        )


def _check_spans(parts: list[dict[str, Any]], citations: list[Citation]) -> None:
    """A Mistral `reference` chunk cites the text since the one before it: each scripted
    citation's span must be that (the whole text before it, when it is the only one); a
    whole-block citation is a chunk before the text."""
    done, spans = 0, list[tuple[int, int]]()
    for part in parts:
        if part.get("type") == "text":
            done += len(part["text"])
            continue
        spans.append((0, done) if not spans else (spans[-1][1], done))
    for c in citations:
        if c.start is None and c.end is None:
            continue  # written before the text: read back whole-block
        at = next((s for s in spans if s[1] == c.end), None)
        if c.start is None or at is None or at[0] != c.start:
            raise ValueError(
                "vendor_bytes: mistral-conversations cites with a `reference` chunk after the "
                f"text since the chunk before it: the citation's start, end ({c.start}, "
                f"{c.end}) must be that span, one of {spans}"
            )


def block_delta(block: Any, api: str) -> dict[str, Any]:
    """A block of a `block_*` kind as the delta a chat server sends it in: a generated
    image as OpenRouter's `images`, a vendor block of this API as a typed content part or
    as the delta field it was read from. Anything else (a server-run tool: Groq's
    `executed_tools` carry no call id; an approval request) raises, naming it."""
    if (
        isinstance(block, FileContent)
        and api == "openai-completions"
        and block.data is not None
        and (block.mime_type or "").startswith("image/")
    ):
        url = f"data:{block.mime_type};base64,{block.data}"
        return {"images": [{"type": "image_url", "image_url": {"url": url}}]}
    if isinstance(block, VendorContent) and block.api == api:
        data = block.data
        if type(data.get("type")) is str and data["type"] not in ("text", "thinking", "reference"):
            return {"content": [data]}
        if len(data) == 1:
            ((name, value),) = data.items()
            if name not in KNOWN_DELTA_FIELDS and name not in _HANDLERS and value:
                return {name: value}
    raise ValueError(
        f"vendor_bytes: {api} has no way to say a {getattr(block, 'type', 'block')} block "
        "in a stream (see providers/_chat_citations.py)"
    )
