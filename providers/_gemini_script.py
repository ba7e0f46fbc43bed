"""What `vendor_bytes` may script for Gemini: a turn the translator reads back as written.

Gemini says a search, a file search and a URL fetch as candidate metadata
(`groundingMetadata`, `urlContextMetadata`) on the last chunk, and the translator derives
blocks from it: citations on the texts, then a call and result pair after every part. A
scripted turn must therefore hold that same shape (raw-less blocks), which is checked by
reading the metadata the writer would send back with the translator's own reader
(`PartReader`) and comparing field for field:

- a citation cites a span of its text block (`start` and `end` set: Gemini's supports
  are byte spans) by `url` and `title` (a grounding chunk's `web`), its `cited_text`
  unset or exactly `text[start:end]` (the segment's text);
- the grounding pair comes last (before a URL-context pair): `ServerToolCall(id=
  "gemini-grounding", name="google_search", kind="web_search", input={"queries": [...]})`
  (`input={}` when no query was run) and `ServerToolResult(call_id="gemini-grounding",
  name="google_search", kind="web_search", sources=[Source(url, title), ...])` whose
  sources are every cited page, in order of first use (sources first), none twice; a
  citation without such a pair in the turn raises (Gemini has no citation without one);
- a URL fetch: `ServerToolCall(id="gemini-url_context", name="url_context",
  kind="web_fetch", input={"urls": [...]})` and its result, text one `url: status` line
  per page.

Parts (`executableCode`, `codeExecutionResult`, Gemini 3 `toolCall` / `toolResponse`)
must carry only what a part has: a code call's `code` and `language`, a code result's
text (no `exit_code`), a tool call named by its `toolType` in lower case.
"""

from __future__ import annotations

import json
from typing import Any

from stream_core import Citation, ServerToolCall, ServerToolResult, TextContent

from ._gemini_parts import _CODE, API, RESPONSE_METADATA, TOOL_KINDS, PartReader

__all__ = ["check_script"]


class _Reading:
    """The part of an assembler `PartReader` uses when a candidate ends."""

    def __init__(self, content: list[Any]) -> None:
        self.message = type("M", (), {"content": content, "response_id": None})()

    def cite_at(self, index: int, citation: Citation) -> bool:
        block = self.message.content[index]
        block.citations = [*(block.citations or []), citation]
        return True

    def add_block(self, block: Any) -> None:
        self.message.content.append(block)

    def set_server_tools(self, counts: dict[str, int]) -> None:
        pass


def _dump(block: Any) -> dict[str, Any]:
    out: dict[str, Any] = block.model_dump(mode="json", exclude={"raw"})
    for c in out.get("citations") or ():
        c.pop("raw", None)
    return out


def _refuse(what: str) -> ValueError:
    return ValueError(f"vendor_bytes: {API} {what} (see providers/_gemini_script.py)")


def _check_part(block: Any) -> None:
    """A raw-less server call or result written as a part: only what the part says."""
    if isinstance(block, ServerToolCall):
        if block.caller is not None:
            raise _refuse("has no `caller` on a server call")
        if not isinstance(block.input, dict):
            raise _refuse("holds a server call's `input` as an object")
    if block.kind == _CODE:
        if block.name != _CODE:
            raise _refuse(f"names a code part `code_execution`, not {block.name!r}")
        if isinstance(block, ServerToolCall) and set(block.input) - {"language", "code"}:
            raise _refuse(f"has no field for a code call's input {sorted(block.input)}")
        if isinstance(block, ServerToolResult) and (block.exit_code is not None or block.sources):
            field = "exit_code" if block.exit_code is not None else "sources"
            raise _refuse(f"has no field for a code result's `{field}` (an outcome, an output)")
        return
    tool_type = block.name.upper()
    if (
        not block.name
        or block.name != block.name.lower()
        or block.kind != TOOL_KINDS.get(tool_type)
    ):
        raise _refuse(
            f"names a server tool part by its `toolType` and reads its kind from it: "
            f"{block.name!r} (kind {block.kind!r}) reads back as {block.name.lower()!r} "
            f"(kind {TOOL_KINDS.get(tool_type)!r})"
        )
    if isinstance(block, ServerToolResult):
        if block.is_error or block.exit_code is not None or block.sources:
            raise _refuse("has no field for a toolResponse's is_error, exit_code or sources")
        if block.text and not _is_json(block.text):
            raise _refuse("carries a toolResponse's `text` as its JSON `response`")


def _is_json(text: str) -> bool:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False) == text
    except ValueError:
        return False


def check_script(content: list[Any], metadata: dict[str, Any]) -> None:
    """Raise, naming the field, unless the translator reads the scripted `content` (text
    blocks as `TextContent` with their citations, blocks of the `block_*` kinds, anything
    else as None) and the candidate `metadata` the writer made of it back as scripted."""
    for block in content:
        if isinstance(block, ServerToolCall | ServerToolResult) and block.raw is None:
            if block.kind not in ("web_search", "file_search", "web_fetch"):
                _check_part(block)
    texts = [(i, b) for i, b in enumerate(content) if isinstance(b, TextContent)]
    derived = [
        b
        for b in content
        if isinstance(b, ServerToolCall | ServerToolResult)
        and (b.raw is None and b.kind in ("web_search", "file_search", "web_fetch"))
    ]
    carried = [
        b
        for b in content
        if isinstance(b, ServerToolResult)
        and b.raw is not None
        and any(k in b.raw for k in RESPONSE_METADATA)
    ]
    made = any(c.raw is None for _, b in texts for c in b.citations or ())
    paired = {b.call_id for b in carried}  # a carried result's call is derived, raw-less
    if carried and (
        made
        or any(b.id not in paired for b in derived if b.type != "server_tool_result")
        or any(isinstance(b, ServerToolResult) for b in derived)
    ):
        raise _refuse("reads one groundingMetadata: script the vendor's `raw` or the blocks")
    if carried:
        return
    reading = _Reading([TextContent(text=b.text) for _, b in texts])
    reader = PartReader(reading)  # type: ignore[arg-type]
    reader.metadata(metadata)
    reader.finish()
    got = reading.message.content
    for (_, scripted), back in zip(texts, got, strict=False):
        want = [_dump(c) for c in scripted.citations or ()]
        have = [_dump(c) for c in back.citations or ()]
        if want != have:
            fields = sorted({k for w, h in zip(want, have, strict=False) for k in {**w, **h}
                             if w.get(k) != h.get(k)} or {"citations"})  # fmt: skip
            raise _refuse(
                f"cites a span of a text block by url and title, with the span's own text: "
                f"a citation's {', '.join(fields)} would read back otherwise ({have})"
            )
    tail = content[len(content) - len(derived) :] if derived else []
    if [_dump(b) for b in got[len(texts) :]] != [_dump(b) for b in derived] or any(
        a is not b for a, b in zip(tail, derived, strict=True)
    ):
        raise _refuse(
            "says a search and a fetch as grounding metadata, read back as a call and "
            "result after every part: script them last, as the module's docstring "
            f"shows; this turn reads back as {[_dump(b) for b in got[len(texts) :]]}"
        )
