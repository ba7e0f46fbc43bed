"""The writers of `vendor_bytes` for the SSE APIs (Anthropic Messages, OpenAI Chat
Completions and Mistral, OpenAI Responses, Gemini), and the helpers every writer shares:
a faux turn's blocks as the events each vendor streams. Blocks of the newer kinds (server
tools, citations, files) are written by the provider's own codec module, the tables its
translator reads."""

from __future__ import annotations

import importlib
import json
from typing import Any

from .._events import (
    AssistantStreamEvent,
    BlockEnd,
    BlockStart,
    MessageEnd,
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
)
from .._types import (
    AssistantMessage,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from . import _codec
from ._codec import Block as _Block
from ._codec import Turn as _Turn

__all__ = ["MODEL", "anthropic", "arguments", "chat", "gemini", "ndjson", "responses", "sse", "u"]

MODEL = "synthetic-model"


def arguments(b: _Block, api: str) -> Any:
    """A call's arguments as the object an API that sends them whole needs."""
    try:
        return json.loads(b.text or "{}")
    except ValueError:
        raise ValueError(
            f"vendor_bytes: {api} sends a tool call's arguments whole, so the cut call "
            f"{b.name!r} (arguments {b.text[:40]!r}...) cannot be written in it"
        ) from None


def u(t: _Turn, name: str) -> int:
    return int(t.usage.get(name, 0))


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = b""
    for event, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out += (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()
    return out


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)


# --- Anthropic Messages --------------------------------------------------------------------


def anthropic(t: _Turn) -> bytes:
    usage = {
        "input_tokens": u(t, "input"),
        "cache_creation_input_tokens": u(t, "cache_write"),
        "cache_read_input_tokens": u(t, "cache_read"),
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
                    "model": MODEL,
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
            deltas = [{"type": "citations_delta", "citation": codec.script_citation(c)}
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
        return sse(events)
    stop: dict[str, Any] = {"stop_reason": t.vendor_stop, "stop_sequence": None}
    if t.detail:
        stop["stop_details"] = {"explanation": t.detail}
    if t.container:
        stop["container"] = t.container
    end_usage: dict[str, Any] = {"output_tokens": u(t, "output")}
    if t.server_tools:
        end_usage["server_tool_use"] = codec.encode_server_tool_counts(t.server_tools)
    end = {"type": "message_delta", "delta": stop, "usage": end_usage}
    events += [("message_delta", end), ("message_stop", {"type": "message_stop"})]
    return sse(events)


# --- OpenAI Chat Completions and Mistral -----------------------------------------------------


def chat(t: _Turn, *, mistral: bool = False) -> bytes:
    """The turn's events written by the provider's own chunk encoder (the gateway's),
    strict: a block or citation the API has no field for raises, naming it."""
    codec: Any = importlib.import_module("stream_core.providers._chat_encode")
    api = "mistral-conversations" if mistral else "openai-completions"
    _, events = turn_events(t, api)
    encoder = codec.ChatEncoder(
        MODEL, api=api, table=_codec._tables(api)[0], strict=True,
        response_id="chatcmpl-synthetic", created=0,
    )  # fmt: skip
    return b"".join(encoder.feed(e) for e in events)


def turn_events(t: _Turn, api: str) -> tuple[AssistantMessage, list[AssistantStreamEvent]]:
    """A read turn as the final message and the events of its stream: each block's start,
    its whole text, arguments or typed data in one delta, its end; then the end."""
    content: list[Any] = []
    deltas: list[Any] = []
    for i, b in enumerate(t.blocks):
        if b.kind == "text":
            content.append(TextContent(text=b.text, citations=list(b.citations) or None))
            deltas += [TextStart(i), *([TextDelta(i, b.text)] if b.text else []), TextEnd(i)]
        elif b.kind == "thinking":
            content.append(
                ThinkingContent(thinking=b.text, signature=b.signature, redacted=b.redacted)
            )
            deltas += [ThinkingStart(i), *([ThinkingDelta(i, b.text)] if b.text else [])]
            deltas.append(ThinkingEnd(i))
        elif b.kind == "block":
            content.append(b.data)
            deltas += [BlockStart(i, b.data.type), BlockEnd(i)]
        else:
            try:
                parsed = json.loads(b.text or "{}")
            except ValueError:
                parsed = None
            whole = type(parsed) is dict
            content.append(
                ToolCall(id=b.id, name=b.name, arguments=parsed if whole else {},
                         truncated=not whole)
            )  # fmt: skip
            deltas += [ToolCallStart(i), *([ToolCallDelta(i, b.text)] if b.text else [])]
            deltas.append(ToolCallEnd(i))
    failed = t.error is not None and t.said is not None
    message = AssistantMessage(
        api=api, provider="synthetic", model=MODEL, content=content, usage=Usage(
            input=u(t, "input"), output=u(t, "output"), cache_read=u(t, "cache_read"),
            cache_write=u(t, "cache_write"), reasoning=u(t, "reasoning"),
            server_tools=dict(t.server_tools) or None,
        ),
        stop_reason="error" if failed else t.stop,  # type: ignore[arg-type]
        raw_stop_reason=None if failed else t.vendor_stop,
        error=StreamError.model_validate({"kind": t.error[0], "message": t.error[1]})
        if failed and t.error
        else None,
    )  # fmt: skip
    events: list[AssistantStreamEvent] = [MessageStart(message)]
    events += [MessageUpdate(message, d) for d in deltas]
    events.append(MessageEnd(message))
    return message, events


# --- OpenAI Responses ------------------------------------------------------------------------


def responses(t: _Turn) -> bytes:
    # Server tools, built-in calls, approvals, vendor items, citations: the provider's codec.
    codec: Any = importlib.import_module("stream_core.providers._responses_builtin_out")
    events: list[tuple[str | None, Any]] = []
    n = 0

    def add(kind: str, **data: Any) -> None:
        nonlocal n
        events.append((kind, {"type": kind, "sequence_number": n, **data}))
        n += 1

    response = {"id": "resp_synthetic", "object": "response", "model": MODEL, "output": []}
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
            notes = [codec.script_annotation(c) for c in b.citations]
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
        return sse(events)
    usage = {
        "input_tokens": u(t, "input") + u(t, "cache_read"),
        "input_tokens_details": {"cached_tokens": u(t, "cache_read")},
        "output_tokens": u(t, "output"),
        "output_tokens_details": {"reasoning_tokens": u(t, "reasoning")},
        "total_tokens": u(t, "input") + u(t, "cache_read") + u(t, "output"),
    }
    final = {**response, "output": items, "usage": usage}
    if t.stop == "length":
        final.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        add("response.incomplete", response=final)
    else:
        add("response.completed", response={**final, "status": "completed"})
    return sse(events)


def _codec_tool(b: _Block) -> Any:
    """A scripted built-in call as the `ToolCall` the Responses codec writes."""
    from .._types import ToolCall

    return ToolCall(id=b.id, name=b.name, arguments=arguments(b, "openai-responses"), **b.tool)


# --- Gemini ----------------------------------------------------------------------------------


def _gemini_can_say(block: Any) -> None:
    """Raise for a block Gemini has no part or metadata for (the codec would drop it, or
    relabel another API's vendor block as Gemini's own)."""
    api = "google-generative-ai"
    if block.type in ("approval_request", "approval_response"):
        raise ValueError(f"vendor_bytes: {api} has no way to say a {block.type} block")
    if block.type == "vendor" and block.api != api:
        raise ValueError(f"vendor_bytes: a VendorContent of {block.api} cannot go to {api}")
    grounded = ("web_search", "file_search", "web_fetch")  # said as candidate metadata
    if block.type == "server_tool_result" and block.raw is None and block.kind in grounded:
        if block.text:
            raise ValueError(
                f"vendor_bytes: {api} says a {block.kind} result as grounding metadata, "
                "with its sources but no text; leave `text` empty or give the vendor's `raw`"
            )


def _as_content(b: _Block) -> Any:
    """A scripted block as the content `_gemini_script.check_script` reads."""
    from .._types import TextContent

    if b.kind == "text":
        return TextContent(text=b.text, citations=list(b.citations) or None)
    return b.data if b.kind == "block" else None


def gemini(t: _Turn) -> bytes:
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
            _gemini_can_say(b.data)
            part = codec.encode_block(b.data)  # None: candidate metadata, written below
        else:
            part = {
                "functionCall": {
                    "id": b.id,
                    "name": b.name,
                    "args": arguments(b, "google-generative-ai"),
                }
            }
            if b.tool.get("thought_signature"):
                part["thoughtSignature"] = b.tool["thought_signature"]
        if part is not None:
            codec.append_part(parts, part)
    events: list[tuple[str | None, Any]] = []
    for part in parts:
        candidate = {"content": {"role": "model", "parts": [part]}, "index": 0}
        events.append((None, {"candidates": [candidate], "modelVersion": MODEL}))
    if t.failed is not None and t.said is not None:
        word, message = t.failed
        error = {"code": _codec.http_status(t.said.kind), "message": message, "status": word}
        events.append((None, {"error": error}))
        return sse(events)
    thoughts = u(t, "reasoning")
    prompt = u(t, "input") + u(t, "cache_read")
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": u(t, "output") - thoughts,
        "thoughtsTokenCount": thoughts,
        "cachedContentTokenCount": u(t, "cache_read"),
        "totalTokenCount": prompt + u(t, "output"),
    }
    final: dict[str, Any] = {
        "content": {"role": "model", "parts": []},
        "finishReason": t.vendor_stop,
        "index": 0,
    }
    if t.detail:
        final["finishMessage"] = t.detail
    data = [b.data for b in t.blocks if b.kind == "block"]
    metadata = codec.candidate_metadata(data, texts)
    # The turn must be one the translator reads back as scripted (its derived blocks).
    script: Any = importlib.import_module("stream_core.providers._gemini_script")
    script.check_script([_as_content(b) for b in t.blocks], metadata)
    final.update(metadata)
    events.append((None, {"candidates": [final], "usageMetadata": usage, "modelVersion": MODEL}))
    return sse(events)
