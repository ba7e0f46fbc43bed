"""Gemini's whole answer, both ways, for the batch codecs (`_gemini_batch`, `_vertex_batch`).

`answer_body(message, model)` is the `GenerateContentResponse` a batch result carries for
`message`: the inverse of `google._parse_response`. It reads the provider's own tables (the
stop table `google.WIRE.stop_reasons` backwards, the usage fields `google._PROMPT`..., the
part writers of `_gemini_parts`), so what it writes is what the reader reads: text and
thought parts with their `thoughtSignature`, `functionCall`s, server-tool, file and vendor
parts, grounding metadata for cited text, `usageMetadata` and `finishReason` (the raw stop
value the message kept, when the table knows it), or a `promptFeedback` block.

`read_error(value)` reads a request's error as a batch result gives it: a `google.rpc.Status`
(`{code, message}`, the code a gRPC number), an HTTP-style error (`{code: 400, status:
"INVALID_ARGUMENT"}`), or Vertex AI's status text (`"Bad Request: {...}"`); `error_object`
and `status_text` write the first and the last (the fake vendor's).
"""

from __future__ import annotations

import http
import json
import re
from collections.abc import Mapping
from typing import Any

from stream_core import AssistantMessage, Model, TextContent, ThinkingContent, ToolCall
from stream_core.provider import error_from_vendor

from . import google
from ._gemini_parts import SIGNATURE, append_part, candidate_metadata, encode_block

__all__ = ["RPC_CODES", "answer_body", "error_object", "read_error", "status_text"]

RPC_CODES: dict[str, int] = {
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "OUT_OF_RANGE": 11,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "DATA_LOSS": 15,
    "UNAUTHENTICATED": 16,
}
"""`google.rpc.Code`: a status word -> the number a `google.rpc.Status` carries as `code`."""
_RPC_WORDS = {number: word for word, number in RPC_CODES.items()}
_STOPPED = re.compile(r"the model stopped: (?P<raw>.*?)(?: \((?P<detail>.*)\))?", re.DOTALL)


def _first(table: Mapping[str, str], value: str) -> str | None:
    return next((word for word, means in table.items() if means == value), None)


# --- a message as Gemini's whole answer --------------------------------------------------


def _finish(message: AssistantMessage) -> tuple[str | None, str | None]:
    """(finishReason, finishMessage) for the message: its raw stop value when the provider's
    table reads it back as the same stop, else the table's first word for it. None: the
    prompt was blocked (no candidate)."""
    table = google.WIRE.stop_reasons
    raw, stop, error = message.raw_stop_reason, message.stop_reason, message.error
    detail: str | None = None
    rule: str = stop
    if stop == "error" and error is not None and error.kind is not None:
        rule = error.kind
        said = _STOPPED.fullmatch(error.message or "")
        if said is not None:
            detail = said.group("detail")
    elif stop == "tool_use":
        rule = "stop"  # Gemini says STOP; the calls make it `tool_use`
    if raw is not None and table.get(raw) == rule:
        return raw, detail
    if rule == "content_filter" and not message.content and raw is not None:
        return None, detail  # a blocked prompt: `promptFeedback`
    return _first(table, rule) or _first(table, "stop"), detail


def _parts(message: AssistantMessage) -> tuple[list[dict[str, Any]], list[object], list[Any]]:
    parts: list[dict[str, Any]] = []
    blocks: list[object] = []  # server-tool and other blocks, for candidate metadata
    texts: list[tuple[str, Any]] = []  # answer texts and their citations, for grounding
    for block in message.content:
        part: dict[str, Any] | None
        if isinstance(block, TextContent):
            part = {"text": block.text}
            if block.text_signature:
                part[SIGNATURE] = block.text_signature
            texts.append((block.text, block.citations or []))
        elif isinstance(block, ThinkingContent):
            part = {"text": block.thinking, "thought": True}
            if block.signature:
                part[SIGNATURE] = block.signature
        elif isinstance(block, ToolCall):
            call: dict[str, Any] = {"name": block.name, "args": block.arguments}
            if block.id:
                call = {"id": block.id, **call}
            part = {"functionCall": call}
            if block.thought_signature:
                part[SIGNATURE] = block.thought_signature
        else:
            blocks.append(block)
            part = encode_block(block)  # None: it is candidate metadata
        if part is not None:
            append_part(parts, part)
    return parts, blocks, texts


def answer_body(message: AssistantMessage, model: Model) -> dict[str, Any]:
    """The `GenerateContentResponse` a batch result carries for `message` (see the module
    docstring)."""
    u = message.usage
    prompt = u.input + u.cache_read
    usage: dict[str, Any] = {google._PROMPT: prompt, google._CANDIDATES: u.output - u.reasoning}
    if u.reasoning:
        usage[google._THOUGHTS] = u.reasoning
    if u.cache_read:
        usage[google._CACHED] = u.cache_read
    usage["totalTokenCount"] = prompt + u.output
    body: dict[str, Any] = {}
    finish, detail = _finish(message)
    if finish is None:
        feedback = {"blockReason": message.raw_stop_reason}
        if detail:
            feedback["blockReasonMessage"] = detail
        body["promptFeedback"] = feedback
    else:
        parts, blocks, texts = _parts(message)
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": parts},
            "finishReason": finish,
            "index": 0,
        }
        if detail:
            candidate["finishMessage"] = detail
        candidate.update(candidate_metadata(blocks, texts))
        body["candidates"] = [candidate]
    body["usageMetadata"] = usage
    body["modelVersion"] = message.response_model or model.id
    if message.response_id:
        body["responseId"] = message.response_id
    return body


# --- a request's error -------------------------------------------------------------------


def _word_for(kind: str) -> str:
    table = google.ERROR_STATUSES
    fallback = "invalid_request" if kind == "context_overflow" else "server"
    return _first(table, kind) or _first(table, fallback) or "INTERNAL"


def error_object(kind: str, message: str) -> dict[str, Any]:
    """A request's error as a `google.rpc.Status` (`code` the gRPC number of the provider's
    status word for `kind`)."""
    return {"code": RPC_CODES.get(_word_for(kind), 13), "message": message}


def status_text(kind: str, message: str, status: int) -> str:
    """A request's error as Vertex AI's result line says it: the HTTP reason, then the
    error body."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    error = {"code": status, "message": message, "status": _word_for(kind)}
    return f"{phrase}: " + json.dumps({"error": error})


def read_error(value: object) -> tuple[Any, str, int | None]:
    """(kind, message, HTTP status or None) of a request's error of any shape."""
    text: str | None = None
    if isinstance(value, str):
        text = value
        start = value.find("{")
        if start >= 0:
            try:
                inner = json.loads(value[start:])
            except (ValueError, RecursionError):
                inner = None
            if isinstance(inner, dict):
                found = inner.get("error", inner)
                if isinstance(found, dict):
                    value = found
    if not isinstance(value, dict):
        said = text if text is not None else repr(value)[:300]
        words = [w for w in re.findall(r"[A-Z][A-Z_]{2,40}", said) if w in google.ERROR_STATUSES]
        error = error_from_vendor(
            words[0] if words else None, said[:2000] or "error", extra_kinds=google.ERROR_STATUSES
        )
        return error.kind or "server", error.message, None
    code = value.get("code")
    word = value.get("status")
    if not isinstance(word, str) or not word:
        word = _RPC_WORDS.get(code) if type(code) is int else None
    status = code if type(code) is int and 100 <= code <= 599 else None
    given = value.get("message")
    message = given if isinstance(given, str) and given else text or word or "error"
    error = error_from_vendor(
        word, message[:2000], status=status, extra_kinds=google.ERROR_STATUSES
    )
    return error.kind or "server", error.message, status
