"""The Messages API written from our side: a stream's events as the SSE Anthropic sends
(`Encoder`), a whole answer as its non-streamed `Message` (`message_body`) and an error
before content as its HTTP error (`error_body`). The inverse of the translator in
`anthropic.py`, reading the same tables: stop reasons (`WIRE.stop_reasons`), usage fields
(`USAGE_FIELDS`, `REASONING_FIELD`), error types (`ERROR_TYPES`) and, for server tool calls
and results, citations and vendor blocks, `_anthropic_blocks`' writers.

What an Anthropic client has no block for (a file or an approval request another vendor
made, a block of another API) is not written; the state carrier (`CARRIER_PREFIX`, a last
`redacted_thinking` block) holds it for the next turn. A citation that arrives once its
text block has stopped (Gemini grounds an answer at its end) is kept by the carrier too:
the text block is held open until the next block starts, which catches most of them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from json.encoder import encode_basestring
from typing import Any

from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    Citation,
    ErrorKind,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    VendorContent,
)

from ._anthropic_blocks import (
    API,
    CALL_TYPES,
    RESULT_SUFFIX,
    TOOL_KINDS,
    TOOL_TYPES,
    encode_block,
    encode_citation,
    encode_server_tool_counts,
)
from .anthropic import ERROR_TYPES, REASONING_FIELD, USAGE_FIELDS, WIRE

__all__ = ["Encoder", "error_body", "message_body", "stop_word"]

Carrier = Callable[[AssistantMessage], "str | None"]

MEDIA_TYPE = "text/event-stream"

# --- tables -------------------------------------------------------------------------------

STATUSES: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""An error type -> the HTTP status Anthropic answers it with
(https://docs.anthropic.com/en/api/errors)."""

_HTTP_TYPES: dict[str, str] = {
    # A context overflow is Anthropic's 400 "prompt is too long" (request_too_large is a
    # body over the size limit, 413): clients compact the history on that wording.
    "context_overflow": "invalid_request_error",
    "budget": "rate_limit_error",
    "refusal": "invalid_request_error",
    "content_filter": "invalid_request_error",
}
"""Error kinds an HTTP error says otherwise than a stream's error event does."""

_OVERFLOW_WORDS = "prompt is too long"
"""How Anthropic words a context overflow (Claude Code compacts the history on it)."""

_STOPPED = re.compile(r"the model stopped: \S+ \((.*)\)", re.DOTALL)
"""How the assembler words an error a stop reason said (its detail in brackets)."""

_USAGE_ORDER = ("input", "cache_write", "cache_read", "output")
"""The order Anthropic writes its usage fields in (`USAGE_FIELDS` names them)."""


def _first(table: Mapping[str, Any], value: Any) -> str | None:
    return next((word for word, means in table.items() if means == value), None)


def error_type(kind: ErrorKind | str) -> str:
    """The `error.type` of a stream's `error` event for `kind`: the first `ERROR_TYPES` has
    for it (what `vendor_bytes` writes too), else `api_error` (read back `server`)."""
    return _first(ERROR_TYPES, kind) or "api_error"


def error_body(kind: ErrorKind, message: str) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of an error before content, as Anthropic answers it."""
    word = _HTTP_TYPES.get(kind) or error_type(kind)
    if kind == "context_overflow" and _OVERFLOW_WORDS not in message.lower():
        message = f"{_OVERFLOW_WORDS}: {message}"
    return STATUSES.get(word, 500), {"type": "error", "error": {"type": word, "message": message}}


def stop_word(message: AssistantMessage) -> str | None:
    """The `stop_reason` for `message`: its vendor's own when the table reads that back the
    same (`pause_turn`, `stop_sequence`, ...), else the first the table has for its stop
    reason (or for its error's kind, `refusal`); None for an error no stop reason says."""
    stops = WIRE.stop_reasons
    reason: str = message.stop_reason
    if reason in ("error", "aborted"):
        reason = message.error.kind if message.error is not None else "server"
    raw = message.raw_stop_reason
    if raw is not None and stops.get(raw) == reason:
        return raw
    return _first(stops, reason)


def said_by_stop(message: AssistantMessage) -> bool:
    """Whether the message's error is one a stop reason says (a refusal), not an error."""
    if message.stop_reason not in ("error", "aborted"):
        return True
    return message.error is not None and stop_word(message) is not None


def _stop_detail(message: AssistantMessage) -> str | None:
    """The vendor's own explanation of an error said by its stop reason: the assembler
    writes "the model stopped: <raw> (<detail>)"; the detail alone goes back."""
    if message.error is None:
        return None
    found = _STOPPED.fullmatch(message.error.message)
    return found.group(1) if found else message.error.message


def usage_object(usage: Usage) -> dict[str, Any]:
    """Our usage as Anthropic's `usage` (cumulative: the same fields at start and end)."""
    out: dict[str, Any] = {USAGE_FIELDS[k]: getattr(usage, k) for k in _USAGE_ORDER}
    if usage.server_tools:
        out["server_tool_use"] = encode_server_tool_counts(usage.server_tools)
    if usage.reasoning:
        group, name = REASONING_FIELD
        out[group] = {name: usage.reasoning}
    return out


def _message_id(message: AssistantMessage) -> str:
    return message.response_id or f"msg_{uuid.uuid4().hex[:24]}"


# --- blocks -------------------------------------------------------------------------------


def citation_record(c: Citation, api: str) -> dict[str, Any]:
    """A citation as Anthropic's record: its `raw` when Anthropic wrote it, else built."""
    if c.raw is not None and api != API:
        c = c.model_copy(update={"raw": None})
    return encode_citation(c)


def _anthropic_raw(block: Any, api: str) -> bool:
    """Whether a server block's `raw` is an Anthropic block (another API's is rebuilt, even
    where its type reads the same: Nova's grounding is a `server_tool_use` too)."""
    raw = getattr(block, "raw", None)
    if api != API or not isinstance(raw, dict):
        return False
    kind = raw.get("type")
    if isinstance(block, ServerToolCall):
        return kind in CALL_TYPES
    return isinstance(kind, str) and kind.endswith(RESULT_SUFFIX)


def server_block(
    block: Any, following: Iterable[Any] = (), api: str = API
) -> dict[str, Any] | None:
    """A block of a `block_*` kind as Anthropic's block, or None where it has none (a file,
    an approval request, another API's vendor block: the carrier keeps those). Another
    API's server call or result of a kind Anthropic runs is said in Anthropic's words (a
    Gemini `google_search` as `web_search` and `web_search_tool_result`)."""
    if isinstance(block, (ServerToolCall, ServerToolResult)):
        if not _anthropic_raw(block, api):
            foreign: dict[str, Any] = {"raw": None}
            if block.kind in TOOL_TYPES and TOOL_KINDS.get(block.name) != block.kind:
                foreign["name"] = TOOL_TYPES[block.kind][1]
            block = block.model_copy(update=foreign)
    elif not (isinstance(block, VendorContent) and block.api == API):
        return None
    try:
        return encode_block(block, following)
    except ValueError:
        return None


def thinking_block(block: ThinkingContent) -> dict[str, Any]:
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.signature or ""}
    return {"type": "thinking", "thinking": block.thinking, "signature": block.signature or ""}


def tool_block(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
    if call.caller is not None:
        out["caller"] = call.caller
    return out


def content_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    """The message's content as Anthropic's blocks, whole (a non-streamed answer)."""
    out: list[dict[str, Any]] = []
    content = message.content
    for i, b in enumerate(content):
        block: dict[str, Any] | None
        if isinstance(b, TextContent):
            block = {"type": "text", "text": b.text}
            if b.citations:
                block["citations"] = [citation_record(c, message.api) for c in b.citations]
        elif isinstance(b, ThinkingContent):
            block = thinking_block(b)
        elif isinstance(b, ToolCall):
            block = {**tool_block(b), "input": b.arguments}
        else:
            block = server_block(b, content[i + 1 :], message.api)
        if block is not None:
            out.append(block)
    return out


def message_body(
    message: AssistantMessage, model: str, carrier: Carrier | None = None
) -> dict[str, Any]:
    """The non-streamed answer: Anthropic's `Message` object."""
    content = content_blocks(message)
    state = carrier(message) if carrier is not None else None
    if state is not None:
        content.append({"type": "redacted_thinking", "data": state})
    body: dict[str, Any] = {
        "id": _message_id(message),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_word(message),
        "stop_sequence": None,
        "usage": usage_object(message.usage),
    }
    if message.stop_reason == "error" and said_by_stop(message):
        body["stop_details"] = {"type": body["stop_reason"], "explanation": _stop_detail(message)}
    if message.container:
        body["container"] = message.container
    return body


# --- the stream ---------------------------------------------------------------------------


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {_dumps(data)}\n\n".encode("utf-8", _SURROGATES)


_string = encode_basestring  # a JSON string, non-ASCII kept (json.dumps's own, in C)
_SURROGATES = "backslashreplace"
"""How a lone surrogate (which a vendor may send escaped, and UTF-8 cannot hold) is
written: as the JSON escape it came as (`\\ud800`), inside the string it belongs to."""
_INPUT_DELTAS = frozenset({"toolcall_delta", "block_delta"})
_DELTA_HEAD = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
# A delta's field holding its text, by our delta type.
_DELTA_FIELDS = {
    "text_delta": '"delta":{"type":"text_delta","text":',
    "thinking_delta": '"delta":{"type":"thinking_delta","thinking":',
    "toolcall_delta": '"delta":{"type":"input_json_delta","partial_json":',
    "block_delta": '"delta":{"type":"input_json_delta","partial_json":',
}


class Encoder:
    """One streamed answer as Anthropic's SSE (`DialectEncoder`): `message_start` once the
    first content comes (its usage the message's then), a block's start, deltas and stop
    as they arrive, at the end `message_delta` with the stop reason and the final usage
    and `message_stop` (or, after an error, Anthropic's `error` event).

    Two stops wait for the next event: a text block's (a citation may still come for it)
    and a cut tool call's (the stream's error, if that is what cut it, leaves it unstopped,
    as Anthropic's own stream would: a client reads the call as cut)."""

    media_type = MEDIA_TYPE

    def __init__(self, model: str, carrier: Carrier | None = None) -> None:
        self.model = model
        self.carrier = carrier
        self.tool_names: dict[str, tuple[str, str]] = {}
        """Not read: Messages has no tool namespaces (the protocol's field)."""
        self.started = False
        self.count = 0
        """Blocks started so far: the next block's `index`."""
        self.index: dict[int, int] = {}
        """Our content index -> the open block's `index` in the stream."""
        self.waiting: set[int] = set()
        """Blocks written whole at their end (redacted thinking, server results, vendor
        blocks) or once their call's id and name are known."""
        self.said: set[int] = set()
        """Calls whose input has streamed at least one delta."""
        self.held: list[int] = []
        """Blocks ended whose stop is not sent yet (see the class's docstring)."""

    def feed(self, event: AssistantStreamEvent) -> bytes:
        kind = event.type
        if kind == "message_update" and not self.held:
            # The hot path: a delta of a block already open, one event of its own.
            delta: Any = event.delta  # type: ignore[union-attr]
            head = _DELTA_FIELDS.get(delta.type)
            ci = delta.content_index
            i = self.index.get(ci)
            if head is not None and i is not None:
                if delta.type in _INPUT_DELTAS:
                    self.said.add(ci)
                return f"{_DELTA_HEAD}{i},{head}{_string(delta.delta)}}}}}\n\n".encode(
                    "utf-8", _SURROGATES
                )
        if kind == "message_start":
            return b""
        message = event.message
        out: list[bytes] = []
        if not self.started:
            self.started = True
            out.append(self._message_start(message))
        if kind == "message_update":
            self._update(message, event.delta, out)  # type: ignore[union-attr]
        else:
            self._end(message, out)
        return b"".join(out)

    # --- message ------------------------------------------------------------------------

    def _message_start(self, message: AssistantMessage) -> bytes:
        body: dict[str, Any] = {
            "id": _message_id(message),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {USAGE_FIELDS[k]: getattr(message.usage, k) for k in _USAGE_ORDER},
        }
        return _event("message_start", {"type": "message_start", "message": body})

    def _end(self, message: AssistantMessage, out: list[bytes]) -> None:
        if not said_by_stop(message):
            self.held.clear()  # what the error cut stays unstopped
            error = message.error
            kind = error.kind if error is not None else "server"
            text = error.message if error is not None else "the upstream failed"
            said = {"type": error_type(kind), "message": text}
            out.append(_event("error", {"type": "error", "error": said}))
            return
        self._flush(out)
        state = self.carrier(message) if self.carrier is not None else None
        if state is not None:
            self._whole({"type": "redacted_thinking", "data": state}, out)
        delta: dict[str, Any] = {"stop_reason": stop_word(message), "stop_sequence": None}
        if message.stop_reason == "error":
            detail = _stop_detail(message)
            delta["stop_details"] = {"type": delta["stop_reason"], "explanation": detail}
        if message.container:
            delta["container"] = message.container
        end = {"type": "message_delta", "delta": delta, "usage": usage_object(message.usage)}
        out.append(_event("message_delta", end))
        out.append(_event("message_stop", {"type": "message_stop"}))

    # --- blocks -------------------------------------------------------------------------

    def _open(self, ci: int, start: dict[str, Any], out: list[bytes]) -> None:
        self._flush(out)
        i = self.count
        self.count += 1
        self.index[ci] = i
        block = {"type": "content_block_start", "index": i, "content_block": start}
        out.append(_event("content_block_start", block))

    def _stop(self, ci: int, out: list[bytes]) -> None:
        i = self.index.pop(ci, None)
        if i is not None:
            out.append(_event("content_block_stop", {"type": "content_block_stop", "index": i}))

    def _flush(self, out: list[bytes]) -> None:
        if self.held:
            for ci in self.held:
                self._stop(ci, out)
            self.held.clear()

    def _whole(self, start: dict[str, Any] | None, out: list[bytes]) -> None:
        """A block written at once (start and stop), at its end."""
        if start is not None:
            self._open(-1, start, out)
            self._stop(-1, out)

    def _delta(self, ci: int, delta: dict[str, Any], out: list[bytes]) -> None:
        i = self.index.get(ci)
        if i is not None:
            data = {"type": "content_block_delta", "index": i, "delta": delta}
            out.append(_event("content_block_delta", data))

    def _update(self, message: AssistantMessage, delta: Any, out: list[bytes]) -> None:
        kind = delta.type
        ci = delta.content_index
        if kind in _DELTA_FIELDS:
            self._flush(out)
            if kind == "toolcall_delta" and ci in self.waiting:
                self._open_call(message, ci, out)  # its id or name came late: open it now
            if kind in _INPUT_DELTAS:
                self.said.add(ci)
            i = self.index.get(ci)
            if i is not None:
                text = _string(delta.delta)
                frame = f"{_DELTA_HEAD}{i},{_DELTA_FIELDS[kind]}{text}}}}}\n\n"
                out.append(frame.encode("utf-8", _SURROGATES))
            return
        if kind == "citation":  # no flush: it may be for the text block held
            record = citation_record(delta.citation, message.api)
            self._delta(ci, {"type": "citations_delta", "citation": record}, out)
            return
        block = message.content[ci]
        if kind == "text_start":
            self._open(ci, {"type": "text", "text": ""}, out)
        elif kind == "text_end":
            self._flush(out)
            self.held.append(ci)
        elif kind == "thinking_start":
            if block.redacted:
                self.waiting.add(ci)
            else:
                self._open(ci, {"type": "thinking", "thinking": "", "signature": ""}, out)
        elif kind == "thinking_end":
            if ci in self.waiting:
                self.waiting.discard(ci)
                self._whole(thinking_block(block), out)
                return
            self._flush(out)
            if block.signature:
                self._delta(ci, {"type": "signature_delta", "signature": block.signature}, out)
            self._stop(ci, out)
        elif kind == "toolcall_start":
            if isinstance(block, ToolCall) and block.id and block.name:
                self._open(ci, tool_block(block), out)
            else:
                self.waiting.add(ci)
        elif kind == "toolcall_end":
            self._call_end(message, block, ci, out)
        elif kind == "block_start":
            start = (
                server_block(block, (), message.api) if isinstance(block, ServerToolCall) else None
            )
            if start is not None:
                self._open(ci, {**start, "input": {}}, out)
            else:
                self.waiting.add(ci)
        elif kind == "block_end":
            self._flush(out)
            if ci in self.waiting:
                self.waiting.discard(ci)
                self._whole(server_block(block, message.content[ci + 1 :], message.api), out)
                return
            if ci not in self.said and block.input not in ({}, None):
                text = _dumps(block.input)
                self._delta(ci, {"type": "input_json_delta", "partial_json": text}, out)
            self._stop(ci, out)

    def _call_end(self, message: AssistantMessage, block: Any, ci: int, out: list[bytes]) -> None:
        self._flush(out)
        if ci in self.waiting:
            self._open_call(message, ci, out)
        if not isinstance(block, ToolCall):
            return
        if ci not in self.said and block.arguments:
            text = _dumps(block.arguments)
            self._delta(ci, {"type": "input_json_delta", "partial_json": text}, out)
        if block.truncated:
            self.held.append(ci)
        else:
            self._stop(ci, out)

    def _open_call(self, message: AssistantMessage, ci: int, out: list[bytes]) -> None:
        self.waiting.discard(ci)
        block = message.content[ci]
        if isinstance(block, ToolCall):
            self._open(ci, tool_block(block), out)
