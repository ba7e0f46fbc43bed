"""The writers of `vendor_bytes` for the framed APIs: Bedrock ConverseStream (AWS
event-stream frames) and Ollama (newline-delimited JSON)."""

from __future__ import annotations

import importlib
import json
from typing import Any

from ._codec import Turn as _Turn
from ._frames import event_stream_frame
from ._write_sse import MODEL as _MODEL
from ._write_sse import arguments as _arguments
from ._write_sse import ndjson as _ndjson
from ._write_sse import u as _u

__all__ = ["bedrock", "ollama"]

# --- Bedrock ConverseStream ------------------------------------------------------------------


def bedrock(t: _Turn) -> bytes:
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
            out += b"".join(delta(i, {"text": p}) for p in b.pieces or [""])
            for c in b.citations:
                out += delta(i, {"citation": codec.script_citation(c)})
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
            out += b"".join(delta(i, {"reasoningContent": {"text": p}}) for p in b.pieces or [""])
            if b.signature:
                out += delta(i, {"reasoningContent": {"signature": b.signature}})
        else:
            start = {"toolUse": {"toolUseId": b.id, "name": b.name}}
            out += frame("contentBlockStart", {"contentBlockIndex": i, "start": start})
            out += b"".join(delta(i, {"toolUse": {"input": p}}) for p in b.pieces or [""])
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


def ollama(t: _Turn, *, chat: bool) -> bytes:
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
        for piece in b.pieces or [""]:  # one line a piece
            if chat:
                message = {"role": "assistant", "content": "", key: piece}
                lines.append({**base, "message": message, "done": False})
            else:
                lines.append({**base, "response": "", key: piece, "done": False})
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
