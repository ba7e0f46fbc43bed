"""Everything the `stream-core` command draws: colour, the stream, tables, JSON lines.

The only module of the command that knows about escape codes. Hand-written on purpose: a
terminal demo is no reason for a new dependency (rich), and the library never imports the
command, so none of this is on a user's import path.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from typing import TextIO

from .._events import (
    AssistantStreamEvent,
    BlockEnd,
    BlockStart,
    CitationAdded,
    Delta,
    MessageStart,
    MessageUpdate,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    event_to_json,
)
from .._types import (
    ApprovalRequest,
    AssistantMessage,
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
    VendorContent,
)

__all__ = [
    "EventSink",
    "Renderer",
    "error",
    "event_printer",
    "json_line",
    "summary",
    "table",
    "use_color",
]

_DIM, _BOLD, _RED, _CYAN, _RESET = "\x1b[2m", "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[0m"
# C0 controls other than tab and newline: model output must not drive the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

EventSink = Callable[[AssistantStreamEvent], None]


def use_color(out: TextIO) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


class Renderer:
    """Draws one stream for a person to watch, on `out`.

    Text is written as it arrives; thinking goes under a `thinking:` header, indented (and
    dim when `color`); a tool call shows its name, its argument text as it streams, then
    the parsed arguments, flagged when truncated; `message_end` adds the error, if any, and
    a one-line summary of stop reason, usage and cost. Deltas of interleaved blocks (parallel
    tool calls) each start a line labelled with their block, so they never run together.
    """

    def __init__(self, out: TextIO, *, color: bool = False) -> None:
        self.out = out
        self.color = color
        self._reset()

    def _reset(self) -> None:
        self._col0 = True  # the cursor is at the start of a line
        self._last_kind: str | None = None  # kind of the section written last
        self._owner: int | None = None  # the block the current output belongs to
        self._flagged: set[int] = set()  # tool calls already shown as truncated
        self._fresh = False  # the current section has shown nothing yet

    # --- around a stream (the demo's titles and prompt) -------------------------------

    def note(self, text: str) -> None:
        """A line about the run rather than from the model, dim."""
        self.out.write(self._paint(text, _DIM) + "\n")

    def heading(self, text: str) -> None:
        """A bold title after a blank line."""
        self.out.write(f"\n{self._paint(text, _BOLD)}\n")

    def prompt(self, text: str) -> None:
        """The person's turn, then the blank line the answer starts after."""
        self.out.write(f"{self._paint('you:', _CYAN)} {text}\n\n")
        self.out.flush()

    def _paint(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self.color else text

    # --- events -----------------------------------------------------------------------

    def __call__(self, event: AssistantStreamEvent) -> None:
        self.handle(event)

    def handle(self, event: AssistantStreamEvent) -> None:
        if isinstance(event, MessageStart):
            self._reset()
        elif isinstance(event, MessageUpdate):
            self._update(event.message, event.delta)
        else:
            self._end(event.message)
        # Flushed per event: a person is watching.
        self.out.flush()

    def _update(self, message: AssistantMessage, d: Delta) -> None:
        i = d.content_index
        block = message.content[i]
        if isinstance(d, TextStart):
            self._section("text", i)
        elif isinstance(d, TextDelta):
            if self._owner != i:
                self._section("text", i)
            self._emit(d.delta)
        elif isinstance(d, ThinkingStart):
            self._section("thinking", i)
            self._line("thinking:", _DIM)
        elif isinstance(d, ThinkingDelta):
            if self._owner != i:
                self._section("thinking", i)
                self._line("thinking (continued):", _DIM)
            self._emit(d.delta, indent="  ", style=_DIM)
        elif isinstance(d, (TextEnd, ThinkingEnd)):
            self._end_line()
        elif isinstance(block, ToolCall):
            if isinstance(d, ToolCallStart):
                self._section("tool", i)
                self._write("tool call ", _CYAN)
                self._write(block.name or "?", _BOLD)
                self._line(f" (#{i}, id {block.id or '-'})", _DIM)
            elif isinstance(d, ToolCallDelta):
                self._tool_fragment(i, block, d.delta)
            elif isinstance(d, ToolCallEnd):
                self._tool_end(i, block)
        elif isinstance(d, BlockStart):
            self._section("block", i)
            what = _block_name(block)
            self._line(f"{d.kind.replace('_', ' ')}{' ' + what if what else ''} (#{i})", _CYAN)
        elif isinstance(d, BlockEnd):
            self._end_line()
            for line in _block_lines(block):
                self._line("  " + line[:200], _DIM)
        elif isinstance(d, CitationAdded):
            self._end_line()
            self._line(f"  [cites {_citation_label(d.citation)}]", _DIM)

    def _tool_fragment(self, i: int, call: ToolCall, fragment: str) -> None:
        if not fragment:
            return
        if self._owner != i or self._col0:
            self._end_line()
            # The block's own line needs no label; after another block's output it does.
            label = "  > " if self._owner == i else f"  {call.name or '?'} #{i} > "
            self._write(label, _DIM)
            self._owner = i
        self._emit(fragment, indent="    ")

    def _tool_end(self, i: int, call: ToolCall) -> None:
        self._end_line()
        head = "  arguments" if self._owner == i else f"  {call.name or '?'} #{i} arguments"
        if call.truncated:
            self._flagged.add(i)
            self._write(head, None)
            self._line(
                " TRUNCATED (cut off or not valid JSON; do not execute), best-effort parse:",
                _RED,
            )
        else:
            self._line(head + ":")
        for line in json.dumps(call.arguments, indent=2, ensure_ascii=False).split("\n"):
            self._line("    " + line)
        self._owner = i

    def _end(self, message: AssistantMessage) -> None:
        self._end_line()
        # A length stop marks calls truncated only when the message settles, which can be
        # after their toolcall_end was drawn: flag those here.
        late = [
            (i, b)
            for i, b in enumerate(message.content)
            if isinstance(b, ToolCall) and b.truncated and i not in self._flagged
        ]
        why = "cut by the output limit" if message.stop_reason == "length" else "incomplete"
        for i, call in late:
            self._line(f"tool call {call.name or '?'} #{i} TRUNCATED ({why}); do not execute", _RED)
        error = message.error
        if error is not None:
            self._blank()
            text = f"error: {error.kind}: {error.message}"
            if error.status_code is not None:
                text += f" (HTTP {error.status_code})"
            if error.retryable:
                after = f" after {error.retry_after:g}s" if error.retry_after is not None else ""
                text += f" [retryable{after}]"
            self._line(text, _RED)
            if message.content:
                kept = ", ".join(_describe(b) for b in message.content)
                self._line(f"partial content kept: {kept}", _DIM)
        self._blank()
        self._line(summary(message), _BOLD)

    # --- output primitives ------------------------------------------------------------

    def _section(self, kind: str, owner: int) -> None:
        """Start a block's output on a fresh line; a blank line sets text and thinking
        apart, while consecutive tool-call lines stay together."""
        self._end_line()
        if self._last_kind is not None and not (kind == "tool" == self._last_kind):
            self._write("\n", None)
        self._last_kind = kind
        self._owner = owner
        self._fresh = True

    def _write(self, text: str, style: str | None) -> None:
        if not text:
            return
        self._col0 = text.endswith("\n")
        if self.color:
            # On a terminal, escape sequences in model output are shown, not obeyed.
            text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
            if style:
                text = self._paint(text, style)
        self.out.write(text)

    def _emit(self, text: str, *, indent: str = "", style: str | None = None) -> None:
        """Write streamed text, indenting each non-empty line."""
        if self._fresh:
            # Blank lines a block opens with (common in reasoning) would only push it down.
            text = text.lstrip("\n")
            if not text:
                return
            self._fresh = False
        for k, part in enumerate(text.split("\n")):
            if k:
                self.out.write("\n")
                self._col0 = True
            if part:
                if self._col0 and indent:
                    self.out.write(indent)
                self._write(part, style)
                self._col0 = False

    def _line(self, text: str, style: str | None = None) -> None:
        self._write(text, style)
        self.out.write("\n")
        self._col0 = True

    def _end_line(self) -> None:
        if not self._col0:
            self.out.write("\n")
            self._col0 = True

    def _blank(self) -> None:
        self._end_line()
        self.out.write("\n")


def _block_name(block: object) -> str:
    if isinstance(block, FileContent):
        return block.name or block.file_id or block.mime_type or ""
    if isinstance(block, VendorContent):
        return block.vendor_type
    return str(getattr(block, "name", "") or getattr(block, "kind", "") or "")


def _block_lines(block: object) -> list[str]:
    """What a done block says, under its heading: a server call's input, a result's
    sources and output, a file's type and size, an approval's arguments (5 lines at most)."""
    if isinstance(block, ServerToolCall):
        shown = block.input if not isinstance(block.input, dict) or block.input else None
        return [] if shown is None else ["input: " + json.dumps(shown, ensure_ascii=False)]
    if isinstance(block, ApprovalRequest):
        return ["arguments: " + json.dumps(block.arguments, ensure_ascii=False)]
    as_text = getattr(block, "as_text", None)
    lines = str(as_text()).split("\n") if callable(as_text) else []
    # A result's reading opens with a heading of its own (the line drawn at block_start);
    # any other block's one line is the whole of it.
    return lines[1:6] if isinstance(block, ServerToolResult) else lines[:1]


def _citation_label(citation: Citation) -> str:
    label = citation.label()
    if label:
        return label
    quoted = citation.cited_text or ""
    return f'"{quoted[:100]}..."' if len(quoted) > 100 else f'"{quoted}"' if quoted else "-"


def _describe(block: object) -> str:
    if isinstance(block, TextContent):
        return f"text ({len(block.text)} chars)"
    if isinstance(block, ThinkingContent):
        return f"thinking ({len(block.thinking)} chars)"
    if isinstance(block, UnknownContent):
        return f"{block.type} block"
    if not isinstance(block, ToolCall):
        return f"{getattr(block, 'type', 'other')} block"
    return f"tool call {block.name or '?'}" + (" (truncated)" if block.truncated else "")


def summary(message: AssistantMessage) -> str:
    """One line: stop reason (and the vendor's own), token usage, cost in USD."""
    u = message.usage
    raw = message.raw_stop_reason
    stop = f"stop: {message.stop_reason} (raw: {raw if raw is not None else 'none'})"
    tokens = (
        f"tokens: input {u.input}, output {u.output}, cache read {u.cache_read}, "
        f"cache write {u.cache_write}, reasoning {u.reasoning}, total {u.total_tokens}"
    )
    cost = f"cost: ${u.cost.total:.6f}" if u.cost is not None else "cost unknown"
    return " | ".join((stop, tokens, cost))


def table(out: TextIO, title: str, rows: Sequence[Sequence[str]]) -> None:
    """`title`, then `rows` (the first is the header) in left-aligned columns two spaces
    apart, then a blank line."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out.write(title + "\n")
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    out.write("\n")


def json_line(out: TextIO, data: object) -> None:
    """One JSON value on one line, non-ASCII kept as is."""
    out.write(json.dumps(data, ensure_ascii=False) + "\n")


def event_printer(out: TextIO) -> EventSink:
    """A sink that prints each event as one JSON line, flushed as it comes."""

    def print_event(event: AssistantStreamEvent) -> None:
        # Serialized at once: toolcall_end reads arguments from the live message.
        json_line(out, event_to_json(event))
        out.flush()

    return print_event


def error(err: TextIO, text: str) -> None:
    """The one `error: ...` line of a command that cannot go on."""
    err.write(f"error: {text}\n")
    err.flush()
