"""The Responses API written back: a stream's events as the server-sent events OpenAI
streams (`ResponsesEncoder`), a finished message as the Response object it answers
without streaming (`response_body`), an error before content as OpenAI's error body.

The inverse of the translator (`openai_responses`), read from its own tables: the
incomplete reasons of its stop table, the usage paths it reads (`USAGE_PATHS`), the
server-tool counters (`USAGE_KINDS`), the built-in items and annotations of
`_responses_builtin_out`, and OpenAI's error words (`_chat_encode.ERRORS`, shared with
Chat Completions, which answers errors alike).

The stream: `response.created`, `response.in_progress`; per block one output item
(`output_item.added` ... `output_item.done`) with its own events: a message's
`content_part.added`, `output_text.delta`s, `output_text.annotation.added` per citation,
`output_text.done`, `content_part.done`; a reasoning item's `reasoning_summary_part.added`,
`reasoning_summary_text.delta`s and `.done`s; a function call's
`function_call_arguments.delta`s and `.done`; a built-in or server item whole. Then
`response.completed`, `response.incomplete` (`incomplete_details.reason`) or
`response.failed` (`error.code`), holding every item and the usage. Every event has its
`sequence_number`.

What the message's own API wrote (`native`: the message came from this API, or
`vendor_bytes` writes a script) goes back as it came: a reasoning item kept whole in a
thinking block's signature, a message's id and phase, a call's item id, a built-in's or
server item's `raw`. Another vendor's state is not written into these fields: it rides in
the state carrier, one more reasoning item at the end whose `encrypted_content` the
client sends back unchanged.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    BlockEnd,
    BlockStart,
    Citation,
    CitationAdded,
    ErrorKind,
    MessageEnd,
    MessageUpdate,
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
)
from stream_core.provider import error_from_vendor

from ._chat_encode import ERRORS
from ._responses_builtin import SERVER_CALLS
from ._responses_builtin_out import annotation, builtin_call_item, encode_block, script_annotation
from ._responses_encode_parts import arguments, events_of, foreign, shown_call, usage
from .openai_responses import API, ERROR_KINDS, WIRE

__all__ = ["ResponsesEncoder", "events_of", "response_body"]

Carrier = Callable[[AssistantMessage], "str | None"]

_STATUSES = frozenset({"completed", "in_progress", "queued", "incomplete", "failed", "cancelled"})
_INCOMPLETE: dict[str, str] = {}
for _word, _rule in WIRE.stop_reasons.items():
    if _word not in _STATUSES:
        _INCOMPLETE.setdefault(_rule, _word)
"""Portable stop rule -> the `incomplete_details.reason` the translator reads as it (the
stop table's words that are not a response status): `length` is `max_output_tokens`,
`content_filter` is `content_filter`."""

_ANNOTATIONS = frozenset({"url_citation", "file_citation", "container_file_citation", "file_path"})
"""The annotation types of an `output_text` part (a citation's `raw` of another API is not
one of them)."""

_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _json(data: Any) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "replace")  # a lone surrogate cannot be UTF-8


def _loads(text: str | None) -> dict[str, Any] | None:
    if not text or not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class _Item:
    """One output item being written: its index, id, what streamed into it."""

    __slots__ = ("block", "index", "id", "kind", "parts", "notes", "item", "shown")

    def __init__(self, kind: str, item: dict[str, Any], block: int = -1) -> None:
        self.kind = kind
        self.block = block
        self.item = item
        self.id: str = str(item.get("id") or "")
        self.index = -1
        self.parts: list[str] = []
        self.notes: list[dict[str, Any]] = []
        self.shown = False


class ResponsesEncoder:
    """One streamed answer as Responses SSE bytes, one event at a time (`feed`).

    `model`: the name the client asked for (the response's `model`); `carrier`: where
    another vendor's state rides (None: nothing is carried); `strict`: raise for what the
    Responses API cannot say instead of leaving it to the carrier (`vendor_bytes`)."""

    media_type = "text/event-stream"

    def __init__(self, model: str, carrier: Carrier | None = None, *, strict: bool = False):
        self.model = model
        self.carrier = carrier
        self.strict = strict
        self.tool_names: dict[str, tuple[str, str]] = {}
        self.final: dict[str, Any] | None = None
        """The Response object of the terminal event, once written."""
        self._seq = 0
        self._native = strict
        self._base: dict[str, Any] | None = None
        self._tag = ""
        self._count = 0
        self._next = 0
        self._open: dict[int, _Item] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._held: _Item | None = None
        """An item whose `output_item.done` waits: a server call for the reading that may
        follow it, a message for citations sent once its text is done (Gemini's)."""
        self._texts: dict[int, dict[str, Any]] = {}
        """Content index -> the finished message item of that text block."""

    # --- the events ---------------------------------------------------------------------

    def feed(self, event: AssistantStreamEvent) -> bytes:
        out: list[bytes] = []
        if self._base is None:
            self._start(event.message, out)
        if isinstance(event, MessageUpdate):
            handler = _HANDLERS.get(event.delta.type)
            if handler is not None:
                handler(self, event.message, event.delta, out)
        elif isinstance(event, MessageEnd):
            self._end(event.message, out)
        return b"".join(out)

    def _emit(self, out: list[bytes], kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        out.append(b"event: " + kind.encode() + b"\ndata: " + _json(data) + b"\n\n")

    def _start(self, message: AssistantMessage, out: list[bytes]) -> None:
        self._native = self.strict or message.api == API
        rid = message.response_id or ""
        rid = _ID_CHARS.sub("_", rid)[:100]
        if not rid:
            rid = "resp_" + uuid.uuid4().hex
        elif not rid.startswith("resp_"):
            rid = "resp_" + rid
        self._tag = rid[len("resp_") :][:32]
        self._base = {
            "id": rid,
            "object": "response",
            "created_at": message.timestamp // 1000,
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": [],
            "usage": None,
        }
        self._emit(out, "response.created", response=self._base)
        self._emit(out, "response.in_progress", response=self._base)

    def _new_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._tag}_{self._count}"

    def _show(self, entry: _Item, out: list[bytes], item: dict[str, Any] | None = None) -> None:
        """`output_item.added`: the item takes the next output index."""
        entry.index = self._next
        self._next += 1
        entry.shown = True
        shown = item or entry.item
        self._emit(out, "response.output_item.added", output_index=entry.index, item=shown)

    def _finish(self, entry: _Item, item: dict[str, Any], out: list[bytes]) -> None:
        self._done[entry.index] = item
        self._emit(out, "response.output_item.done", output_index=entry.index, item=item)

    def _flush(self, out: list[bytes]) -> None:
        held, self._held = self._held, None
        if held is None:
            pass
        elif held.kind == "message":
            self._close_text(held, out)
        else:
            self._finish(held, held.item, out)

    # --- text ---------------------------------------------------------------------------

    def _text_start(self, message: AssistantMessage, d: TextStart, out: list[bytes]) -> None:
        block = message.content[d.content_index]
        said = self._said(block.text_signature if isinstance(block, TextContent) else None)
        item: dict[str, Any] = {"id": said.get("id") or self._new_id("msg"), "type": "message"}
        item.update(status="in_progress", content=[], role="assistant")
        if said.get("phase"):
            item["phase"] = said["phase"]
        entry = self._open[d.content_index] = _Item("message", item, d.content_index)
        self._flush(out)
        self._show(entry, out)
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        self._emit(out, "response.content_part.added", **self._where(entry), part=part)

    def _said(self, signature: str | None) -> dict[str, Any]:
        """A message's id and phase as this API wrote them into `text_signature`."""
        found = _loads(signature) if self._native else None
        if not found:
            return {}
        return {k: v for k, v in found.items() if k in ("id", "phase") and isinstance(v, str)}

    @staticmethod
    def _where(entry: _Item) -> dict[str, Any]:
        return {"item_id": entry.id, "output_index": entry.index, "content_index": 0}

    def _text_delta(self, message: AssistantMessage, d: TextDelta, out: list[bytes]) -> None:
        entry = self._open.get(d.content_index)
        if entry is None:
            return
        entry.parts.append(d.delta)
        where = self._where(entry)
        self._emit(out, "response.output_text.delta", **where, delta=d.delta, logprobs=[])

    def _citation(self, message: AssistantMessage, d: CitationAdded, out: list[bytes]) -> None:
        note = self._annotation(d.citation)
        if note is None:
            return
        entry = self._open.get(d.content_index)
        held = self._held
        if entry is None and held is not None and held.kind == "message":
            entry = held if held.block == d.content_index else None
        if entry is None:
            done = self._texts.get(d.content_index)
            if done is not None:  # later still: the answer's final output says it
                done["content"][0]["annotations"].append(note)
            return
        entry.notes.append(note)
        self._emit(
            out,
            "response.output_text.annotation.added",
            **self._where(entry),
            annotation_index=len(entry.notes) - 1,
            annotation=note,
        )

    def _annotation(self, c: Citation) -> dict[str, Any] | None:
        if self.strict:
            return script_annotation(c)
        if self._native and c.raw is not None and c.raw.get("type") in _ANNOTATIONS:
            return annotation(c)
        if not (c.url or c.file_id or c.filename):
            return None  # a document citation: Responses has no annotation for it
        return annotation(c.model_copy(update={"raw": None}))

    def _text_end(self, message: AssistantMessage, d: TextEnd, out: list[bytes]) -> None:
        entry = self._open.pop(d.content_index, None)
        if entry is None:
            return
        block = message.content[d.content_index]
        phase = self._said(block.text_signature if isinstance(block, TextContent) else None)
        if "phase" not in entry.item and phase.get("phase"):
            entry.item["phase"] = phase["phase"]
        self._flush(out)
        self._held = entry  # done once the next item starts: late citations join it

    def _close_text(self, entry: _Item, out: list[bytes]) -> None:
        text = "".join(entry.parts)
        where = self._where(entry)
        part = {"type": "output_text", "annotations": entry.notes, "logprobs": [], "text": text}
        self._emit(out, "response.output_text.done", **where, text=text, logprobs=[])
        self._emit(out, "response.content_part.done", **where, part=part)
        item = {**entry.item, "status": "completed", "content": [part]}
        self._texts[entry.block] = item
        self._finish(entry, item, out)

    # --- reasoning ------------------------------------------------------------------------

    def _thinking_start(
        self, message: AssistantMessage, d: ThinkingStart, out: list[bytes]
    ) -> None:
        # Opened at its first text (or its end): reasoning with nothing to show makes no item.
        self._open[d.content_index] = _Item("reasoning", {})

    def _reasoning_item(self, block: Any) -> dict[str, Any] | None:
        """The reasoning item this API wrote, kept whole in the block's signature."""
        if not self._native or not isinstance(block, ThinkingContent):
            return None
        found = _loads(block.signature)
        return found if found is not None and found.get("type") == "reasoning" else None

    def _show_reasoning(self, entry: _Item, block: Any, out: list[bytes]) -> None:
        kept = self._reasoning_item(block)
        item_id = kept.get("id") if kept is not None else None
        entry.item = {"id": item_id if isinstance(item_id, str) and item_id else None}
        entry.item["id"] = entry.item["id"] or self._new_id("rs")
        entry.item.update(type="reasoning", summary=[])
        entry.id = entry.item["id"]
        self._flush(out)
        self._show(entry, out)

    def _thinking_delta(
        self, message: AssistantMessage, d: ThinkingDelta, out: list[bytes]
    ) -> None:
        entry = self._open.get(d.content_index)
        if entry is None:
            return
        if not entry.shown:
            self._show_reasoning(entry, message.content[d.content_index], out)
        if not entry.parts:
            part = {"type": "summary_text", "text": ""}
            where = {"item_id": entry.id, "output_index": entry.index, "summary_index": 0}
            self._emit(out, "response.reasoning_summary_part.added", **where, part=part)
        entry.parts.append(d.delta)
        where = {"item_id": entry.id, "output_index": entry.index, "summary_index": 0}
        self._emit(out, "response.reasoning_summary_text.delta", **where, delta=d.delta)

    def _thinking_end(self, message: AssistantMessage, d: ThinkingEnd, out: list[bytes]) -> None:
        entry = self._open.pop(d.content_index, None)
        if entry is None:
            return
        block = message.content[d.content_index]
        kept = self._reasoning_item(block)
        text = "".join(entry.parts)
        if not entry.shown:
            if kept is None:
                return  # nothing to show, nothing of this API's to keep: the carrier has it
            self._show_reasoning(entry, block, out)
        if entry.parts:
            where = {"item_id": entry.id, "output_index": entry.index, "summary_index": 0}
            self._emit(out, "response.reasoning_summary_text.done", **where, text=text)
            part = {"type": "summary_text", "text": text}
            self._emit(out, "response.reasoning_summary_part.done", **where, part=part)
        if kept is not None:
            item = kept if kept.get("id") == entry.id else {**kept, "id": entry.id}
        else:
            summary = [{"type": "summary_text", "text": text}] if text else []
            item = {**entry.item, "summary": summary}
        self._finish(entry, item, out)

    # --- tool calls -----------------------------------------------------------------------

    def _call_start(self, message: AssistantMessage, d: ToolCallStart, out: list[bytes]) -> None:
        block = message.content[d.content_index]
        if not isinstance(block, ToolCall):
            return
        if self._native and block.builtin:
            item = builtin_call_item(block)
            entry = self._open[d.content_index] = _Item("builtin", item)
            self._flush(out)
            self._show(entry, out, {**item, "status": "in_progress"})
            return
        self._open[d.content_index] = entry = _Item("call", {})
        if block.id and block.name:
            self._show_call(entry, block, out)

    def _show_call(self, entry: _Item, block: ToolCall, out: list[bytes]) -> None:
        """`output_item.added` once the call's id and name are known (its identity; the
        SDK pairs the finished item with it), then the arguments held until then."""
        item_id = block.thought_signature if self._native else None
        entry.item = {
            "id": item_id or self._new_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": block.id,
            "name": block.name,
        }
        self._declared(entry.item)
        entry.id = entry.item["id"]
        self._flush(out)
        self._show(entry, out)
        if entry.parts:
            where = {"item_id": entry.id, "output_index": entry.index}
            held = "".join(entry.parts)
            self._emit(out, "response.function_call_arguments.delta", **where, delta=held)

    def _call_delta(self, message: AssistantMessage, d: ToolCallDelta, out: list[bytes]) -> None:
        entry = self._open.get(d.content_index)
        block = message.content[d.content_index]
        if entry is None or entry.kind != "call" or not isinstance(block, ToolCall):
            return  # a built-in's input is not JSON as it streams: it comes whole
        if not entry.shown:
            if not (block.id and block.name):
                entry.parts.append(d.delta)  # held until the call is named
                return
            self._show_call(entry, block, out)
        entry.parts.append(d.delta)
        where = {"item_id": entry.id, "output_index": entry.index}
        self._emit(out, "response.function_call_arguments.delta", **where, delta=d.delta)

    def _call_end(self, message: AssistantMessage, d: ToolCallEnd, out: list[bytes]) -> None:
        entry = self._open.pop(d.content_index, None)
        block = message.content[d.content_index]
        if entry is None or not isinstance(block, ToolCall):
            return
        if entry.kind == "builtin":
            self._finish(entry, builtin_call_item(block), out)
            return
        if not entry.shown:
            self._show_call(entry, block, out)
        if entry.parts:
            text = "".join(entry.parts)
        else:
            text = block.partial_json if block.truncated else arguments(block)
        where = {"item_id": entry.id, "output_index": entry.index}
        self._emit(out, "response.function_call_arguments.done", **where, arguments=text)
        status = "incomplete" if block.truncated else "completed"
        item = {**entry.item, "status": status, "arguments": text}
        item.update(call_id=block.id or item["call_id"], name=block.name or item["name"])
        self._declared(item)
        if self._native and block.raw is not None:
            item = dict(block.raw)  # the vendor's item (a program's call, a namespace)
        elif self._native and block.caller is not None:
            item["caller"] = block.caller
        self._finish(entry, item, out)

    def _declared(self, item: dict[str, Any]) -> None:
        """A call to a tool the client declared in a `namespace` (flattened for another
        vendor) in the client's words: its namespace and its own name."""
        declared = self.tool_names.get(item["name"])
        if declared is not None:
            item["namespace"], item["name"] = declared

    # --- server tools, built-in results, approvals, vendor items ---------------------------

    def _block_start(self, message: AssistantMessage, d: BlockStart, out: list[bytes]) -> None:
        return  # the item is written whole at the block's end

    def _block_end(self, message: AssistantMessage, d: BlockEnd, out: list[bytes]) -> None:
        block = message.content[d.content_index]
        if not self._native:
            block = foreign(block)
            if block is None:
                return
        held = self._held
        previous = held.item if held is not None and held.kind == "block" else None
        try:
            written = encode_block(block, previous)
        except ValueError:
            if self.strict:
                raise
            return  # Responses cannot say it: the carrier keeps it for the upstream
        if written is None:
            return  # a reading of the call before it, written into that item
        item = shown_call(written) if not self._native else written
        self._flush(out)
        entry = _Item("block", item)
        self._show(entry, out, {**item, "status": "in_progress"})
        if item.get("type") in SERVER_CALLS:
            self._held = entry  # its result may follow: written into it before it is done
        else:
            self._finish(entry, item, out)

    # --- the end --------------------------------------------------------------------------

    def _end(self, message: AssistantMessage, out: list[bytes]) -> None:
        for index in sorted(self._open):
            handler = _ENDS[self._open[index].kind]
            handler(self, message, index, out)
        self._flush(out)
        carried = self.carrier(message) if self.carrier is not None else None
        if carried is not None:
            entry = _Item("reasoning", {"id": self._new_id("rs"), "type": "reasoning"})
            entry.item["summary"] = []
            self._show(entry, out)
            self._finish(entry, {**entry.item, "encrypted_content": carried}, out)
        assert self._base is not None
        final = {**self._base, "output": [self._done[i] for i in sorted(self._done)]}
        final["usage"] = usage(message, final)
        rule: str = message.stop_reason
        error = message.error
        if rule in ("error", "aborted") and error is not None and error.kind in _INCOMPLETE:
            rule = error.kind  # a content filter ends a response `incomplete`
        if rule in _INCOMPLETE:
            final.update(status="incomplete", incomplete_details={"reason": _INCOMPLETE[rule]})
            kind = "response.incomplete"
        elif rule in ("error", "aborted"):
            said: ErrorKind = error.kind if error is not None else "server"
            text = error.message if error is not None else "the upstream failed"
            final.update(
                status="failed", error={"code": _code(said, text, self.strict), "message": text}
            )
            kind = "response.failed"
        else:
            final["status"] = "completed"
            kind = "response.completed"
        self.final = final
        self._emit(out, kind, response=final)


def _code(kind: ErrorKind, text: str, strict: bool) -> str:
    """OpenAI's code for a failure of `kind` (`ERRORS`). Strict (`vendor_bytes`): a code
    the translator reads back as another kind (`budget` is OpenAI's `insufficient_quota`,
    read as `rate_limit`) gives way to the kind's own name."""
    _, word, code = ERRORS.get(kind, ERRORS["server"])
    said = code or word
    if strict:
        back = error_from_vendor(said, text, extra_kinds=ERROR_KINDS).kind
        if back != error_from_vendor(kind, text, extra_kinds=ERROR_KINDS).kind:
            said = kind
    return said


def _end_open(kind: str) -> Callable[[ResponsesEncoder, AssistantMessage, int, list[bytes]], None]:
    """Ends a block left open at `message_end` (a stream cut short) with what arrived."""

    def end(enc: ResponsesEncoder, message: AssistantMessage, index: int, out: list[bytes]) -> None:
        if kind == "message":
            enc._text_end(message, TextEnd(content_index=index), out)
        elif kind == "reasoning":
            enc._thinking_end(message, ThinkingEnd(content_index=index), out)
        else:
            enc._call_end(message, ToolCallEnd(content_index=index), out)

    return end


_ENDS = {k: _end_open(k) for k in ("message", "reasoning", "call", "builtin")}

_HANDLERS: dict[str, Callable[[ResponsesEncoder, AssistantMessage, Any, list[bytes]], None]] = {
    "text_start": ResponsesEncoder._text_start,
    "text_delta": ResponsesEncoder._text_delta,
    "citation": ResponsesEncoder._citation,
    "text_end": ResponsesEncoder._text_end,
    "thinking_start": ResponsesEncoder._thinking_start,
    "thinking_delta": ResponsesEncoder._thinking_delta,
    "thinking_end": ResponsesEncoder._thinking_end,
    "toolcall_start": ResponsesEncoder._call_start,
    "toolcall_delta": ResponsesEncoder._call_delta,
    "toolcall_end": ResponsesEncoder._call_end,
    "block_start": ResponsesEncoder._block_start,
    "block_end": ResponsesEncoder._block_end,
}


# --- a finished message as events, and as the non-streamed answer -------------------------


def response_body(message: AssistantMessage, model: str, carrier: Carrier | None) -> dict[str, Any]:
    """The Response object of a finished answer (`stream: false`): the same items, usage
    and status the stream's terminal event holds."""
    encoder = ResponsesEncoder(model, carrier)
    for event in events_of(message):
        encoder.feed(event)
    assert encoder.final is not None
    return copy.deepcopy(encoder.final)
