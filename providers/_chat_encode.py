"""Events written as Chat Completions bytes: the inverse of the `openai-completions`
translator (`_openai_chat`), read from its own tables, for the gateway and `vendor_bytes`.

A stream is `chat.completion.chunk`s: a first chunk with the role, `content` deltas,
reasoning as `reasoning_content` deltas (or the field the reasoning came in, when a chat
server wrote it: `reasoning`, `reasoning_text`), `tool_calls` deltas (`index`, `id`,
`type`, `function.name`, `function.arguments`), `url_citation` annotations after the text
they cite (spans counted in the whole message's text), a finishing chunk whose
`finish_reason` is the stop table's word, a usage chunk (`choices: []`) and
`data: [DONE]`. A message that ended with an error after its content ends with the data
chunk `{"error": {...}}` the translator reads (with the usage so far) and no `[DONE]`.

Usage is written where `_USAGE_PATHS` reads it first: `prompt_tokens` counts cached and
cache-written input too (as OpenAI counts), `completion_tokens` includes reasoning.

With a state carrier (the gateway's, for a foreign upstream) each tool call is held until
it ends and sent whole, its id `f"{id}~{carrier(message)}"`. What the dialect has no
field for (a server tool's call and result, another API's vendor block, a citation with
no URL) is not said to the client (it rides in the carrier when there is one); with
`strict=True` (`vendor_bytes`) it raises instead, naming it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    Citation,
    ErrorKind,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    is_context_overflow,
)
from stream_core.provider import error_from_vendor

from ._chat_citations import block_delta, citations_delta, url_annotation
from ._openai_chat import _REASONING_FIELDS, _USAGE_PATHS, SIGNATURE_FIELDS
from .openai_completions import API, WIRE

__all__ = ["ERRORS", "ChatEncoder", "error_body", "finish_reason", "message_body", "usage_of"]

Carrier = Callable[[AssistantMessage], "str | None"]

ERRORS: dict[str, tuple[int, str, str | None]] = {
    "invalid_request": (400, "invalid_request_error", None),
    "context_overflow": (400, "invalid_request_error", "context_length_exceeded"),
    "auth": (401, "authentication_error", "invalid_api_key"),
    "not_found": (404, "not_found_error", "model_not_found"),
    "rate_limit": (429, "rate_limit_exceeded", "rate_limit_exceeded"),
    "budget": (429, "insufficient_quota", "insufficient_quota"),
    "content_filter": (400, "content_filter", "content_filter"),
    "refusal": (400, "refusal", None),
    "server": (500, "server_error", None),
    "invalid_output": (500, "invalid_output", None),
    "aborted": (500, "aborted", None),
    "protocol": (502, "protocol", None),
    "network": (502, "network", None),
    "overloaded": (503, "service_unavailable", None),
    "timeout": (504, "timeout_error", None),
    "expired": (500, "batch_expired", "batch_expired"),
}
"""Error kind -> (HTTP status, `error.type`, `error.code`) as an OpenAI server answers.
Over HTTP the status and type read back (`error_from_status`) as the kind, but `budget`
(read as `rate_limit`: OpenAI's word for a spent quota) and the kinds only a client finds
(`refusal`, `protocol`, `network`, ...: read by their status). Mid-stream (`_STREAM_WORDS`)
every kind reads back as itself."""

_OVERFLOW_WORDS = " (context_length_exceeded)"


def _streamed(kind: str, word: str) -> str:
    """The `error.type` of a mid-stream error: the table's word where the translator reads
    it back as the kind, else the kind's own name (`budget`), which it reads as itself."""
    message = "x" + (_OVERFLOW_WORDS if kind == "context_overflow" else "")
    return word if error_from_vendor(word, message).kind == kind else kind


_STREAM_WORDS = {kind: _streamed(kind, word) for kind, (_, word, _code) in ERRORS.items()}


def error_body(kind: ErrorKind, message: str) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of an error before content (`ERRORS`)."""
    status, word, code = ERRORS.get(kind, ERRORS["server"])
    return status, {"error": _error(kind, message, word, code)}


def _error(kind: str, message: str, word: str, code: str | int | None) -> dict[str, Any]:
    if kind == "context_overflow" and not is_context_overflow(message):
        message += _OVERFLOW_WORDS  # a reader that goes by the wording reads it too
    return {"message": message, "type": word, "param": None, "code": code}


def _error_of(message: AssistantMessage) -> dict[str, Any]:
    """The error a message ended with, as a mid-stream error's `error` object (`code`: the
    table's, else the HTTP status the upstream gave, as proxies send it)."""
    error = message.error or StreamError(kind="server", message="the upstream failed")
    _, _word, code = ERRORS.get(error.kind, ERRORS["server"])
    said: str | int | None = code if code is not None else error.status_code
    return _error(error.kind, error.message, _STREAM_WORDS.get(error.kind, "server_error"), said)


def _stop_words(table: Mapping[str, str]) -> dict[str, str]:
    """Portable stop rule -> the table's first word for it (`tool_use`: `tool_calls`)."""
    out: dict[str, str] = {}
    for word, rule in table.items():
        out.setdefault(rule, word)
    return out


_LOOSE = frozenset({"stop", "tool_use"})


def finish_reason(
    message: AssistantMessage, table: Mapping[str, str] = WIRE.stop_reasons, api: str = API
) -> str | None:
    """The `finish_reason` that says the message's stop reason through the stop `table`
    (None: the message ends with an error chunk instead). A chat server's own word is kept
    when it reads back the same."""
    rule: str = message.stop_reason
    if rule in ("error", "aborted"):
        kind = message.error.kind if message.error is not None else "server"
        return _stop_words(table).get(kind)  # content_filter: a stop word; others: error chunk
    raw = message.raw_stop_reason
    if raw is not None and message.api == api and raw in table:
        said = table[raw]
        if said == rule or {said, rule} <= _LOOSE:
            return raw
    return _stop_words(table).get(rule) or "stop"


def usage_of(usage: Usage, *, details: bool = True) -> dict[str, Any]:
    """`usage` where the translator reads it first (`_USAGE_PATHS`): the exact inverse."""
    prompt = usage.input + usage.cache_read + usage.cache_write
    values = {
        "prompt": prompt,
        "completion": usage.output,
        "total": prompt + usage.output,
        "cached": usage.cache_read,
        "cache_write": usage.cache_write,
        "reasoning": usage.reasoning,
    }
    out: dict[str, Any] = {}
    for name, paths in _USAGE_PATHS.items():
        value, path = values[name], paths[0]
        if len(path) > 1 and (not details or (name == "cache_write" and not value)):
            continue
        into = out
        for part in path[:-1]:
            into = into.setdefault(part, {})
        into[path[-1]] = value
    searches = (usage.server_tools or {}).get("web_search")
    if searches:
        out["server_tool_use"] = {"web_search_requests": searches}
    return out


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ASCII = json.JSONEncoder(separators=(",", ":")).encode
_STRING = json.encoder.encode_basestring  # a JSON string, in C


def _dumps(value: Any) -> bytes:
    try:
        return _ENCODE(value).encode()
    except UnicodeEncodeError:  # a lone surrogate a vendor escaped: escaped again
        return _ASCII(value).encode()


def _reasoning_field(block: ThinkingContent) -> str:
    sig = block.signature
    return sig if sig is not None and sig in _REASONING_FIELDS else "reasoning_content"


def _signature_fields(block: ThinkingContent) -> dict[str, Any]:
    """The `SIGNATURE_FIELDS` a chat server sent with this reasoning (stored as JSON)."""
    sig = block.signature or ""
    if not sig.startswith("{"):
        return {}
    try:
        kept = json.loads(sig)
    except (ValueError, RecursionError):
        return {}
    if type(kept) is not dict:
        return {}
    return {k: kept[k] for k in SIGNATURE_FIELDS if type(kept.get(k)) is list and kept[k]}


class ChatEncoder:
    """One streamed answer as `chat.completion.chunk` bytes, one event at a time (see the
    module's docstring). `api` `mistral-conversations`: Mistral's chunks (cited text as
    `reference` chunks, no usage details), for `vendor_bytes`."""

    media_type = "text/event-stream"

    def __init__(
        self,
        model: str,
        carrier: Carrier | None = None,
        *,
        api: str = API,
        table: Mapping[str, str] = WIRE.stop_reasons,
        strict: bool = False,
        response_id: str | None = None,
        created: int | None = None,
    ) -> None:
        self._model = model
        self._carrier = carrier
        self.tool_names: dict[str, tuple[str, str]] = {}
        """Not read: Chat Completions has no tool namespaces (the protocol's field)."""
        self._api = api
        self._table = table
        self._strict = strict
        self._mistral = api == "mistral-conversations"
        self._id = response_id
        self._created = created
        self._pre = b""
        self._calls: dict[int, int] = {}  # content index -> tool_calls index
        self._unsaid: set[int] = set()  # calls whose id and name are not sent yet
        self._args: dict[int, list[str]] = {}  # held calls' argument text (carrier)
        self._texts: dict[int, list[str]] = {}  # Mistral: a text block's pieces
        self._cited: dict[int, int] = {}  # text block -> citations said
        self._offset: dict[int, int] = {}  # text block -> its start in the message's text
        self._said = 0  # the message's text so far (annotation spans count in all of it)
        self._signed: set[int] = set()  # thinking blocks whose signature fields are sent

    # --- framing ---------------------------------------------------------------------------

    def _start(self, message: AssistantMessage) -> None:
        rid = self._id or message.response_id or f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = self._created
        if created is None:
            created = message.timestamp // 1000 if message.timestamp else int(time.time())
        head = {"id": rid, "object": "chat.completion.chunk", "created": created}
        self._base = {**head, "model": self._model}
        self._pre = b"data: " + _dumps(self._base)[:-1] + b',"choices":[{"index":0,"delta":'

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        tail = b"null" if finish is None else _dumps(finish)
        return self._pre + _dumps(delta) + b',"finish_reason":' + tail + b"}]}\n\n"

    def _data(self, obj: dict[str, Any]) -> bytes:
        return b"data: " + _dumps(obj) + b"\n\n"

    # --- events ----------------------------------------------------------------------------

    def feed(self, event: AssistantStreamEvent) -> bytes:
        if event.type == "message_start":
            return b""  # the first chunk waits for the response's id (the first content)
        head = b""
        if not self._pre:
            self._start(event.message)
            head = self._chunk({"role": "assistant", "content": ""})
        if event.type == "message_update":
            return head + self._update(event.message, event.delta)
        return head + self._end(event.message)

    def _update(self, message: AssistantMessage, d: Any) -> bytes:
        kind = d.type
        i = d.content_index
        if kind == "text_delta":
            if self._mistral and (
                i in self._texts or getattr(message.content[i], "citations", None)
            ):
                # Cited text waits for its end: its reference chunks cut it where cited.
                self._texts.setdefault(i, []).append(d.delta)
                return b""
            try:
                said = _STRING(d.delta).encode()
            except UnicodeEncodeError:
                said = _dumps(d.delta)
            return self._pre + b'{"content":' + said + b'},"finish_reason":null}]}\n\n'
        if kind == "thinking_delta":
            block = message.content[i]
            if self._mistral and getattr(block, "signature", None) == "thinking":
                part = {"type": "thinking", "thinking": [{"type": "text", "text": d.delta}]}
                return self._chunk({"content": [part]})
            assert isinstance(block, ThinkingContent)
            return self._chunk({_reasoning_field(block): d.delta})
        if kind == "toolcall_delta":
            return self._call_delta(message, i, d.delta)
        if kind == "text_start":
            self._offset[i] = self._said
            return b""
        if kind == "text_end":
            return self._text_end(message, i)
        if kind == "citation":
            if i in self._cited and not self._mistral:
                return self._annotations(message, i)  # after its text was said
            return b""
        if kind == "toolcall_start":
            self._calls[i] = len(self._calls)
            self._unsaid.add(i)
            if self._carrier is not None:
                self._args[i] = []
            return b""
        if kind == "toolcall_end":
            return self._call_end(message, i)
        if kind == "thinking_end":
            return self._signatures(message, i)
        if kind == "block_end":
            return self._block(message.content[i])
        return b""  # thinking_start, block_start, block_delta: said at their end

    def _text_end(self, message: AssistantMessage, i: int) -> bytes:
        block = message.content[i]
        assert isinstance(block, TextContent)
        out = b""
        if self._mistral:
            text = "".join(self._texts.pop(i, ()))
            cited = (
                citations_delta(text, block.citations, self._api, self._said)
                if block.citations
                else {}
            )
            if "content" in cited:
                out = self._chunk(cited)  # the text with its reference chunks
            else:
                out = self._chunk({"content": text}) if text else b""
                if cited:
                    out += self._chunk(cited)
            self._cited[i] = len(block.citations or ())
        else:
            self._cited[i] = 0
            out = self._annotations(message, i)
        self._said += len(block.text)
        return out

    def _annotations(self, message: AssistantMessage, i: int) -> bytes:
        block = message.content[i]
        assert isinstance(block, TextContent)
        new = (block.citations or [])[self._cited[i] :]
        if not new:
            return b""
        self._cited[i] += len(new)
        offset = self._offset.get(i, 0)
        if self._strict:
            return self._chunk(citations_delta(block.text, new, self._api, offset))
        said = [_annotation(c, offset) for c in new if _sayable(c)]
        return self._chunk({"annotations": said}) if said else b""

    def _head(self, block: ToolCall, n: int, arguments: str, call_id: str) -> bytes:
        fn = {"name": block.name, "arguments": arguments}
        return self._chunk(
            {"tool_calls": [{"index": n, "id": call_id, "type": "function", "function": fn}]}
        )

    def _call_delta(self, message: AssistantMessage, i: int, delta: str) -> bytes:
        held = self._args.get(i)
        if held is not None and (self._carrier is not None or i not in self._unsaid):
            held.append(delta)
            return b""
        if i in self._unsaid:
            # The call's first chunk names it: sent once its id and name are known.
            block = message.content[i]
            if not (isinstance(block, ToolCall) and block.id and block.name):
                self._args.setdefault(i, []).append(delta)
                return b""
            self._unsaid.discard(i)
            head = "".join(self._args.pop(i, ())) + delta
            return self._head(block, self._calls[i], head, block.id)
        n = self._calls[i]
        return self._chunk({"tool_calls": [{"index": n, "function": {"arguments": delta}}]})

    def _call_end(self, message: AssistantMessage, i: int) -> bytes:
        block = message.content[i]
        assert isinstance(block, ToolCall)
        if i not in self._unsaid:
            return b""  # streamed as it came
        self._unsaid.discard(i)
        arguments = "".join(self._args.pop(i, ()))
        if not arguments and not block.truncated:
            arguments = "{}"
        call_id = block.id
        if self._carrier is not None:
            carried = self._carrier(message)
            if carried:
                call_id = f"{block.id}~{carried}"
        return self._head(block, self._calls[i], arguments, call_id)

    def _signatures(self, message: AssistantMessage, i: int) -> bytes:
        block = message.content[i]
        if not isinstance(block, ThinkingContent) or i in self._signed:
            return b""
        fields = _signature_fields(block)
        if not fields:
            return b""
        self._signed.add(i)
        return self._chunk(fields)

    def _block(self, block: Any) -> bytes:
        try:
            said = block_delta(block, self._api)
        except ValueError:
            if self._strict:
                raise
            return b""  # no field for it in this dialect (the carrier holds it)
        return self._chunk(said)

    def _end(self, message: AssistantMessage) -> bytes:
        out = b""
        for i, block in enumerate(message.content):
            if isinstance(block, ThinkingContent) and i not in self._signed:
                out += self._signatures(message, i)  # signatures that came after the text
        finish = finish_reason(message, self._table, self._api)
        usage = usage_of(message.usage, details=not self._mistral)
        if finish is None:
            raw = message.raw_stop_reason
            if raw is not None and message.api == self._api and raw in self._table:
                out += self._chunk({}, raw)  # the server finished, then failed
            return out + self._data({"error": _error_of(message), "usage": usage})
        out += self._chunk({}, finish)
        out += self._data({**self._base, "choices": [], "usage": usage})
        return out + b"data: [DONE]\n\n"


def _annotation(c: Citation, offset: int) -> dict[str, Any]:
    """`url_annotation`, a citation of the whole text given OpenRouter's empty span (0, 0):
    an OpenAI client's types require one, and the translator reads it as none."""
    said = url_annotation(c, offset)
    inner = said.get("url_citation")
    if type(inner) is dict and "start_index" not in inner:
        said = {**said, "url_citation": {**inner, "start_index": 0, "end_index": 0}}
    return said


def _sayable(c: Citation) -> bool:
    raw = c.raw
    return c.url is not None or (raw is not None and type(raw.get("url_citation")) is dict)


# --- the non-streamed answer ----------------------------------------------------------------


def message_body(
    message: AssistantMessage, model: str, carrier: Carrier | None = None
) -> dict[str, Any]:
    """`message` as a whole `chat.completion` (what the SDK accumulates from the stream):
    one text (every text block, in order), the reasoning, the calls, the annotations. An
    error after content is said by an `error` member beside them."""
    text, annotations = "", []
    thinking: list[ThinkingContent] = []
    calls: list[dict[str, Any]] = []
    images: list[Any] = []
    has_calls = any(isinstance(b, ToolCall) for b in message.content)
    carried = carrier(message) if carrier is not None and has_calls else None
    for block in message.content:
        if isinstance(block, TextContent):
            cited = [c for c in block.citations or () if _sayable(c)]
            annotations += [_annotation(c, len(text)) for c in cited]
            text += block.text
        elif isinstance(block, ThinkingContent):
            thinking.append(block)
        elif isinstance(block, ToolCall):
            fn = {"name": block.name, "arguments": json.dumps(block.arguments, ensure_ascii=False)}
            call_id = f"{block.id}~{carried}" if carried else block.id
            calls.append({"id": call_id, "type": "function", "function": fn})
        else:
            try:
                said = block_delta(block, API)
            except ValueError:
                continue
            images += said.get("images", [])
    out: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    reasoning = "".join(b.thinking for b in thinking)
    if reasoning:
        out[_reasoning_field(thinking[0])] = reasoning
    for block in thinking:
        for name, items in _signature_fields(block).items():
            out.setdefault(name, []).extend(items)
    if calls:
        out["tool_calls"] = calls
    if annotations:
        out["annotations"] = annotations
    if images:
        out["images"] = images
    finish = finish_reason(message)
    body: dict[str, Any] = {
        "id": message.response_id or f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": message.timestamp // 1000 if message.timestamp else int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": out, "finish_reason": finish or "stop", "logprobs": None}
        ],
        "usage": usage_of(message.usage),
    }
    if finish is None:
        body["error"] = _error_of(message)
    return body
