"""Any scripted turn as real vendor bytes: `vendor_bytes(turn, api)`.

A faux-style turn (a `FauxTurn`, an `AssistantMessage` or a string: text, thinking, tool
calls with arguments, usage, a stop reason, an error before or after content, an HTTP
error) written in the exact wire format of each built-in API, with the `.json` a recording
carries (its api, status, headers and the `expect` the contract kit compares), so
`replay_client`, `replay_sequence`, `fake_vendor` and `stream-core serve` play it like a
recording. Each API's bytes replay through its provider to the scripted message.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import is_context_overflow
from .._types import AssistantMessage
from . import _codec
from ._codec import Block as _Block
from ._codec import Turn as _Turn
from ._faux import FauxTurn, _as_turn
from ._frames import event_stream_frame

__all__ = ["APIS", "Synthesized", "vendor_bytes"]

_MODEL = "synthetic-model"


def _arguments(b: _Block, api: str) -> Any:
    """A call's arguments as the object an API that sends them whole needs."""
    try:
        return json.loads(b.text or "{}")
    except ValueError:
        raise ValueError(
            f"vendor_bytes: {api} sends a tool call's arguments whole, so the cut call "
            f"{b.name!r} (arguments {b.text[:40]!r}...) cannot be written in it"
        ) from None


def _u(t: _Turn, name: str) -> int:
    return int(t.usage.get(name, 0))


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = b""
    for event, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out += (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()
    return out


def _ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)


# --- Anthropic Messages --------------------------------------------------------------------


def _anthropic(t: _Turn) -> bytes:
    usage = {
        "input_tokens": _u(t, "input"),
        "cache_creation_input_tokens": _u(t, "cache_write"),
        "cache_read_input_tokens": _u(t, "cache_read"),
        "output_tokens": 0,
    }
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_synthetic",
                    "type": "message",
                    "role": "assistant",
                    "model": _MODEL,
                    "content": [],
                    "stop_reason": None,
                    "usage": usage,
                },
            },  # fmt: skip
        )
    ]
    # Server calls and results, vendor blocks, citations: the provider's own codec.
    codec: Any = importlib.import_module("stream_core.providers._anthropic_blocks")
    data = [b.data for b in t.blocks]
    i = -1
    for n, b in enumerate(t.blocks):
        start: dict[str, Any]
        if b.kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "citations_delta", "citation": codec.encode_citation(c)}
                      for c in b.citations] + [{"type": "text_delta", "text": b.text}]  # fmt: skip
        elif b.kind == "thinking" and b.redacted:
            start, deltas = {"type": "redacted_thinking", "data": b.signature or ""}, []
        elif b.kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": b.text}]
            if b.signature:
                deltas.append({"type": "signature_delta", "signature": b.signature})
        elif b.kind == "block":
            written = codec.encode_streamed(data, n)
            if written is None:
                continue  # a generated file: its result block carries it
            start, deltas = written
        else:
            start = {"type": "tool_use", "id": b.id, "name": b.name, "input": {}}
            if b.tool.get("caller"):
                start["caller"] = b.tool["caller"]
            deltas = [{"type": "input_json_delta", "partial_json": b.text}]
        i += 1
        block_start = {"type": "content_block_start", "index": i, "content_block": start}
        events.append(("content_block_start", block_start))
        for d in deltas:
            delta = {"type": "content_block_delta", "index": i, "delta": d}
            events.append(("content_block_delta", delta))
        if t.failed is None:
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    if t.failed is not None:
        word, message = t.failed
        events.append(("error", {"type": "error", "error": {"type": word, "message": message}}))
        return _sse(events)
    stop: dict[str, Any] = {"stop_reason": t.vendor_stop, "stop_sequence": None}
    if t.detail:
        stop["stop_details"] = {"explanation": t.detail}
    if t.container:
        stop["container"] = t.container
    end_usage: dict[str, Any] = {"output_tokens": _u(t, "output")}
    if t.server_tools:
        end_usage["server_tool_use"] = codec.encode_server_tool_counts(t.server_tools)
    end = {"type": "message_delta", "delta": stop, "usage": end_usage}
    events += [("message_delta", end), ("message_stop", {"type": "message_stop"})]
    return _sse(events)


# --- OpenAI Chat Completions and Mistral -----------------------------------------------------


def _chat(t: _Turn, *, mistral: bool = False) -> bytes:
    base = {
        "id": "chatcmpl-synthetic",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": _MODEL,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    # Citations and blocks of the `block_*` kinds: the provider's codec (or its refusal).
    codec: Any = importlib.import_module("stream_core.providers._chat_citations")
    api = "mistral-conversations" if mistral else "openai-completions"
    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    calls = 0
    said = 0  # the message's text so far (annotation spans count in all of it)
    for b in t.blocks:
        if b.kind == "text":
            cited = codec.citations_delta(b.text, b.citations, api, said) if b.citations else {}
            if "content" in cited:
                events.append((None, chunk(cited)))  # the text with its reference chunks
            else:
                events.append((None, chunk({"content": b.text})))
                if cited:
                    events.append((None, chunk(cited)))
            said += len(b.text)
        elif b.kind == "thinking":
            events.append((None, chunk({"reasoning_content": b.text})))
        elif b.kind == "block":
            events.append((None, chunk(codec.block_delta(b.data, api))))
        else:
            head = {
                "index": calls,
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": ""},
            }
            events.append((None, chunk({"tool_calls": [head]})))
            events.append(
                (None, chunk({"tool_calls": [{"index": calls, "function": {"arguments": b.text}}]}))
            )
            calls += 1
    if t.failed is not None:
        word, message = t.failed
        events.append((None, {"error": {"message": message, "type": word, "code": None}}))
        return _sse(events)
    events.append((None, chunk({}, t.vendor_stop)))
    prompt = _u(t, "input") + _u(t, "cache_read") + _u(t, "cache_write")
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": _u(t, "output"),
        "total_tokens": prompt + _u(t, "output"),
    }
    if not mistral:
        usage["prompt_tokens_details"] = {"cached_tokens": _u(t, "cache_read")}
        usage["completion_tokens_details"] = {"reasoning_tokens": _u(t, "reasoning")}
    events.append((None, {**base, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return _sse(events)


# --- OpenAI Responses ------------------------------------------------------------------------


def _responses(t: _Turn) -> bytes:
    # Server tools, built-in calls, approvals, vendor items, citations: the provider's codec.
    codec: Any = importlib.import_module("stream_core.providers._responses_builtin_out")
    events: list[tuple[str | None, Any]] = []
    n = 0

    def add(kind: str, **data: Any) -> None:
        nonlocal n
        events.append((kind, {"type": kind, "sequence_number": n, **data}))
        n += 1

    response = {"id": "resp_synthetic", "object": "response", "model": _MODEL, "output": []}
    add("response.created", response={**response, "status": "in_progress"})
    items: list[dict[str, Any]] = []
    for k, b in enumerate(t.blocks):
        if b.kind == "text":
            item_id = f"msg_{k}"
            item: dict[str, Any] = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            add("response.output_item.added", output_index=k, item=item)
            part = {"type": "output_text", "text": "", "annotations": []}
            add(
                "response.content_part.added",
                item_id=item_id,
                output_index=k,
                content_index=0,
                part=part,
            )
            add(
                "response.output_text.delta",
                item_id=item_id,
                output_index=k,
                content_index=0,
                delta=b.text,
            )
            notes = [codec.annotation(c) for c in b.citations]
            for i, note in enumerate(notes):
                add(
                    "response.output_text.annotation.added",
                    item_id=item_id,
                    output_index=k,
                    content_index=0,
                    annotation_index=i,
                    annotation=note,
                )
            done_part = {**part, "text": b.text, "annotations": notes}
            add(
                "response.output_text.done",
                item_id=item_id,
                output_index=k,
                content_index=0,
                text=b.text,
            )
            add(
                "response.content_part.done",
                item_id=item_id,
                output_index=k,
                content_index=0,
                part=done_part,
            )
            item = {**item, "status": "completed", "content": [done_part]}
        elif b.kind == "thinking":
            item_id = f"rs_{k}"
            item = {"type": "reasoning", "id": item_id, "summary": []}
            add("response.output_item.added", output_index=k, item=item)
            part = {"type": "summary_text", "text": ""}
            add(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=k,
                summary_index=0,
                part=part,
            )
            add(
                "response.reasoning_summary_text.delta",
                item_id=item_id,
                output_index=k,
                summary_index=0,
                delta=b.text,
            )
            add(
                "response.reasoning_summary_text.done",
                item_id=item_id,
                output_index=k,
                summary_index=0,
                text=b.text,
            )
            add(
                "response.reasoning_summary_part.done",
                item_id=item_id,
                output_index=k,
                summary_index=0,
                part={**part, "text": b.text},
            )
            item = {**item, "summary": [{"type": "summary_text", "text": b.text}]}
        elif b.kind == "block" or b.tool.get("builtin"):
            if b.kind == "block":
                written = codec.encode_block(b.data, items[-1] if items else None)
            else:
                written = codec.builtin_call_item(_codec_tool(b))
            if written is None:
                continue  # a reading written into the item before it
            item = written
            shown = {**item, "status": "in_progress"}
            add("response.output_item.added", output_index=k, item=shown)
        else:
            item_id = f"fc_{k}"
            item = {
                "type": "function_call",
                "id": item_id,
                "call_id": b.id,
                "name": b.name,
                "arguments": "",
                "status": "in_progress",
            }
            add("response.output_item.added", output_index=k, item=item)
            add(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=k,
                delta=b.text,
            )
            add(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=k,
                arguments=b.text,
            )
            item = {**item, "arguments": b.text, "status": "completed"}
            if b.tool.get("raw") is not None:
                item = b.tool["raw"]  # the vendor's item (a program's call, a namespace)
            elif b.tool.get("caller") is not None:
                item["caller"] = b.tool["caller"]
        if t.failed is None:
            add("response.output_item.done", output_index=k, item=item)
        items.append(item)
    if t.failed is not None:
        word, message = t.failed
        add("error", code=word, message=message, param=None)
        return _sse(events)
    usage = {
        "input_tokens": _u(t, "input") + _u(t, "cache_read"),
        "input_tokens_details": {"cached_tokens": _u(t, "cache_read")},
        "output_tokens": _u(t, "output"),
        "output_tokens_details": {"reasoning_tokens": _u(t, "reasoning")},
        "total_tokens": _u(t, "input") + _u(t, "cache_read") + _u(t, "output"),
    }
    final = {**response, "output": items, "usage": usage}
    if t.stop == "length":
        final.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        add("response.incomplete", response=final)
    else:
        add("response.completed", response={**final, "status": "completed"})
    return _sse(events)


def _codec_tool(b: _Block) -> Any:
    """A scripted built-in call as the `ToolCall` the Responses codec writes."""
    from .._types import ToolCall

    return ToolCall(id=b.id, name=b.name, arguments=_arguments(b, "openai-responses"), **b.tool)


# --- Gemini ----------------------------------------------------------------------------------


def _gemini(t: _Turn) -> bytes:
    # Server tool parts, files, vendor parts and grounding: the provider's own codec.
    codec: Any = importlib.import_module("stream_core.providers._gemini_parts")
    if t.container is not None:
        raise ValueError("vendor_bytes: google-generative-ai has no code-execution container")
    parts: list[dict[str, Any]] = []
    texts: list[tuple[str, Any]] = []  # answer texts and their citations, for grounding
    for b in t.blocks:
        part: dict[str, Any] | None
        if b.kind == "text":
            part = {"text": b.text}
            if b.text_signature:
                part["thoughtSignature"] = b.text_signature
            texts.append((b.text, b.citations))
        elif b.kind == "thinking":
            part = {"text": b.text, "thought": True}
            if b.signature:
                part["thoughtSignature"] = b.signature
        elif b.kind == "block":
            part = codec.encode_block(b.data)  # None: candidate metadata, written below
        else:
            part = {
                "functionCall": {
                    "id": b.id,
                    "name": b.name,
                    "args": _arguments(b, "google-generative-ai"),
                }
            }
            if b.tool.get("thought_signature"):
                part["thoughtSignature"] = b.tool["thought_signature"]
        if part is not None:
            codec.append_part(parts, part)
    events: list[tuple[str | None, Any]] = []
    for part in parts:
        candidate = {"content": {"role": "model", "parts": [part]}, "index": 0}
        events.append((None, {"candidates": [candidate], "modelVersion": _MODEL}))
    if t.failed is not None and t.said is not None:
        word, message = t.failed
        error = {"code": _codec.http_status(t.said.kind), "message": message, "status": word}
        events.append((None, {"error": error}))
        return _sse(events)
    thoughts = _u(t, "reasoning")
    prompt = _u(t, "input") + _u(t, "cache_read")
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": _u(t, "output") - thoughts,
        "thoughtsTokenCount": thoughts,
        "cachedContentTokenCount": _u(t, "cache_read"),
        "totalTokenCount": prompt + _u(t, "output"),
    }
    final: dict[str, Any] = {
        "content": {"role": "model", "parts": []},
        "finishReason": t.vendor_stop,
        "index": 0,
    }
    if t.detail:
        final["finishMessage"] = t.detail
    data = [b.data for b in t.blocks if b.kind == "block"]
    final.update(codec.candidate_metadata(data, texts))
    events.append((None, {"candidates": [final], "usageMetadata": usage, "modelVersion": _MODEL}))
    return _sse(events)


# --- Bedrock ConverseStream ------------------------------------------------------------------


def _bedrock(t: _Turn) -> bytes:
    # Documents, citations, server tools and vendor blocks: the provider's own codec.
    codec: Any = importlib.import_module("stream_core.providers._bedrock_blocks")

    def frame(event: str, payload: dict[str, Any]) -> bytes:
        return event_stream_frame(event, json.dumps(payload).encode())

    def delta(i: int, value: dict[str, Any]) -> bytes:
        return frame("contentBlockDelta", {"contentBlockIndex": i, "delta": value})

    if t.container is not None:
        raise ValueError("vendor_bytes: bedrock-converse-stream has no code-execution container")
    out = frame("messageStart", {"role": "assistant"})
    for i, b in enumerate(t.blocks):
        if b.kind == "text":
            out += delta(i, {"text": b.text})
            for c in b.citations:
                out += delta(i, {"citation": codec.citation_record(c)})
        elif b.kind == "block":
            try:
                start, deltas = codec.stream_block(b.data)
            except ValueError as e:
                raise ValueError(f"vendor_bytes: {e}") from None
            if start is not None:
                out += frame("contentBlockStart", {"contentBlockIndex": i, "start": start})
            out += b"".join(delta(i, d) for d in deltas)
        elif b.kind == "thinking" and b.redacted:
            out += delta(i, {"reasoningContent": {"redactedContent": b.signature or ""}})
        elif b.kind == "thinking":
            out += delta(i, {"reasoningContent": {"text": b.text}})
            if b.signature:
                out += delta(i, {"reasoningContent": {"signature": b.signature}})
        else:
            start = {"toolUse": {"toolUseId": b.id, "name": b.name}}
            out += frame("contentBlockStart", {"contentBlockIndex": i, "start": start})
            out += delta(i, {"toolUse": {"input": b.text}})
        if t.failed is None:
            out += frame("contentBlockStop", {"contentBlockIndex": i})
    if t.failed is not None:
        word, message = t.failed
        return out + event_stream_frame(
            word, json.dumps({"message": message}).encode(), message_type="exception"
        )
    out += frame("messageStop", {"stopReason": t.vendor_stop})
    usage = codec.usage_record({k: _u(t, k) for k in t.usage}, t.server_tools)
    return out + frame("metadata", {"usage": usage, "metrics": {"latencyMs": 1}})


# --- Ollama ----------------------------------------------------------------------------------


def _ollama(t: _Turn, *, chat: bool) -> bytes:
    base = {"model": _MODEL, "created_at": "2026-01-01T00:00:00Z"}
    lines: list[dict[str, Any]] = []
    calls = []
    api = "ollama-chat" if chat else "ollama-generate"
    for b in t.blocks:
        if b.kind == "block" or b.citations:
            # Ollama streams text, thinking and tool calls only: no server tools, files,
            # vendor blocks or citations to say them with.
            what = f"a {b.data.type} block" if b.kind == "block" else "citations"
            raise ValueError(f"vendor_bytes: {api} has no way to say {what} in a stream")
        if b.kind == "tool":
            if not chat:
                raise ValueError("vendor_bytes: ollama-generate takes no tools (use ollama-chat)")
            arguments = _arguments(b, "ollama-chat")
            calls.append({"function": {"name": b.name, "arguments": arguments}})
            continue
        key = (
            "content"
            if b.kind == "text" and chat
            else "response"
            if b.kind == "text"
            else "thinking"
        )
        if chat:
            lines.append(
                {
                    **base,
                    "message": {"role": "assistant", "content": "", key: b.text},
                    "done": False,
                }
            )
        else:
            lines.append({**base, "response": "", key: b.text, "done": False})
    if calls:
        lines.append(
            {
                **base,
                "message": {"role": "assistant", "content": "", "tool_calls": calls},
                "done": False,
            }
        )
    if t.failed is not None:
        lines.append({"error": t.failed[1]})
        return _ndjson(lines)
    last: dict[str, Any] = {**base, "done": True, "done_reason": t.vendor_stop}
    if chat:
        last["message"] = {"role": "assistant", "content": ""}
    else:
        last["response"] = ""
    # No cache fields: every input token is prompt.
    prompt = _u(t, "input") + _u(t, "cache_read") + _u(t, "cache_write")
    last.update(prompt_eval_count=prompt, eval_count=_u(t, "output"))
    lines.append(last)
    return _ndjson(lines)


APIS: dict[str, tuple[Callable[[_Turn], bytes], str]] = {
    "anthropic-messages": (_anthropic, "text/event-stream"),
    "openai-completions": (_chat, "text/event-stream"),
    "mistral-conversations": (lambda t: _chat(t, mistral=True), "text/event-stream"),
    "openai-responses": (_responses, "text/event-stream"),
    "google-generative-ai": (_gemini, "text/event-stream"),
    "bedrock-converse-stream": (_bedrock, "application/vnd.amazon.eventstream"),
    "ollama-chat": (lambda t: _ollama(t, chat=True), "application/x-ndjson"),
    "ollama-generate": (lambda t: _ollama(t, chat=False), "application/x-ndjson"),
}
"""Each built-in API's writer and its body's content type."""


@dataclass
class Synthesized:
    """A recording made from a script: `body` (the vendor's bytes) and `meta` (the `.json`
    beside a recording: api, status, headers, and the `expect` the contract kit checks)."""

    body: bytes
    meta: dict[str, Any]

    def write(self, path: str | Path) -> Path:
        """Write `<path>.body` and `<path>.json`; returns the `.body` path. Each is written
        whole to a new file, then moved in place: a symbolic link at either name is
        refused (`OSError`), never followed."""
        body = Path(path).with_suffix(".body")
        meta = (json.dumps(self.meta, indent=2) + "\n").encode()
        for target in (body, body.with_suffix(".json")):
            if target.is_symlink():
                raise OSError(f"{target}: a symbolic link; vendor_bytes writes through none")
        _replace(body, self.body)
        _replace(body.with_suffix(".json"), meta)
        return body


def _replace(target: Path, data: bytes) -> None:
    """`data` as `target`: a new file (`mkstemp` opens with O_EXCL) moved over the name, so
    a link planted there after the check is replaced, its target untouched."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def vendor_bytes(
    turn: FauxTurn | AssistantMessage | str, api: str, *, model: str = _MODEL
) -> Synthesized:
    """`turn` as `api` would stream it (see the module's docstring). An HTTP error turn
    (`faux_error(kind, status=...)`) is that status with the error body."""
    writer = APIS.get(api)
    if writer is None:
        raise ValueError(f"vendor_bytes: no writer for {api!r} (it writes: {', '.join(APIS)})")
    faux = _as_turn(turn)
    meta: dict[str, Any] = {"name": f"synthetic-{api}", "api": api, "model": model}
    if faux.status != 200:
        meta.update(status=faux.status, headers={"content-type": "application/json"})
        if faux.retry_after is not None:
            meta["headers"]["retry-after"] = f"{faux.retry_after:g}"
        return Synthesized(_http_body(faux), meta)
    read = _codec.read_turn(faux, api)
    body = writer[0](read).replace(_MODEL.encode(), model.encode())
    meta.update(status=200, headers={"content-type": writer[1]}, expect=_expect(read))
    return Synthesized(body, meta)


def _http_body(faux: FauxTurn) -> bytes:
    """An HTTP error turn's body. A vendor says a context overflow with a 400 and its
    wording (no API has a status for it): `faux_error("context_overflow", status=400)`'s
    body gets the words every provider reads, so it comes back `context_overflow`."""
    if faux.error_kind != "context_overflow":
        return faux.http_body
    try:
        data = json.loads(faux.http_body)
        error = data["error"]
        message = str(error["message"])
    except (ValueError, TypeError, KeyError):
        return faux.http_body
    if is_context_overflow(message):
        return faux.http_body
    error.update(type="context_length_exceeded", message=f"{message}: {_OVERFLOW_WORDS}")
    return json.dumps(data).encode()


_OVERFLOW_WORDS = "the prompt exceeds the context window"


def _expect(t: _Turn) -> dict[str, Any]:
    """What the replayed message must be, in the kit's `expect` shape."""
    content: list[dict[str, Any]] = []
    for b in t.blocks:
        if b.kind == "text":
            content.append({"type": "text", "text": b.text})
            if b.citations:
                content[-1]["citations"] = len(b.citations)
        elif b.kind == "block":
            content.append(_codec.block_summary(b.data))
        elif b.kind == "thinking":
            content.append({"type": "thinking", "thinking": b.text})
        else:
            try:
                arguments: Any = json.loads(b.text or "{}")
            except ValueError:
                arguments = None
            content.append({"type": "tool_call", "name": b.name, "arguments": arguments})
    expect: dict[str, Any] = {"content": content}
    if t.error is not None and t.said is not None:
        expect["stop_reason"] = "error"
        expect["error_kind"] = t.said.kind
    else:
        expect["stop_reason"] = t.stop
    return expect
