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
    CitationAdded,
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
    """The turn's events written by the provider's own encoder (the gateway's). What the
    Messages API cannot say raises first, named (`_anthropic_blocks`' script checks: a
    citation's span, a block it has no block for, a result that would read back otherwise)."""
    checks: Any = importlib.import_module("stream_core.providers._anthropic_blocks")
    codec: Any = importlib.import_module("stream_core.providers._anthropic_encode")
    data = [b.data for b in t.blocks]
    for n, b in enumerate(t.blocks):
        if b.kind == "block":
            checks.encode_streamed(data, n)
        for c in b.citations:
            checks.script_citation(c)
    message, events = turn_events(t, "anthropic-messages")
    message.response_id = "msg_synthetic"
    message.container = t.container
    for b, block in zip(t.blocks, message.content, strict=True):
        if isinstance(block, ToolCall) and b.tool.get("caller"):
            block.caller = b.tool["caller"]  # a programmatic call
    encoder = codec.Encoder(MODEL)
    out = []
    for event in events:
        out.append(encoder.feed(event))
        delta = getattr(event, "delta", None)
        if delta is not None and delta.type == "text_start":
            # Anthropic streams a cited block's citations before its text.
            i = delta.content_index
            cited = message.content[i]
            for c in cited.citations or () if isinstance(cited, TextContent) else ():
                out.append(encoder.feed(MessageUpdate(message, CitationAdded(i, c))))
    return b"".join(out)


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
    one delta per piece its frames gave (`Block.pieces`: a faux message's whole text or
    arguments in one), or its typed data, its end; then the end."""
    content: list[Any] = []
    deltas: list[Any] = []
    for i, b in enumerate(t.blocks):
        if b.kind == "text":
            content.append(TextContent(text=b.text, citations=list(b.citations) or None))
            deltas += [TextStart(i), *(TextDelta(i, p) for p in b.pieces), TextEnd(i)]
        elif b.kind == "thinking":
            content.append(
                ThinkingContent(thinking=b.text, signature=b.signature, redacted=b.redacted)
            )
            deltas += [ThinkingStart(i), *(ThinkingDelta(i, p) for p in b.pieces)]
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
            deltas += [ToolCallStart(i), *(ToolCallDelta(i, p) for p in b.pieces)]
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
    """The turn's events written by the provider's own encoder (the gateway's), strict:
    what the Responses API cannot say raises, named (a citation's field, a server result
    its call item cannot hold, a file not made by an image generation). A message's
    `text_signature` (its id and phase), a reasoning item kept in a thinking block's
    signature, and a call's item id, `raw`, `caller` and built-in type are written back
    as the translator reads them."""
    codec: Any = importlib.import_module("stream_core.providers._responses_encode")
    message, events = turn_events(t, "openai-responses")
    message.response_id = "resp_synthetic"
    for b, block in zip(t.blocks, message.content, strict=True):
        if isinstance(block, TextContent):
            block.text_signature = b.text_signature
        elif isinstance(block, ToolCall):
            for name, value in b.tool.items():
                setattr(block, name, value)  # thought_signature, caller, builtin, raw
    encoder = codec.ResponsesEncoder(MODEL, strict=True)
    out = []
    for event in events:
        delta = getattr(event, "delta", None)
        if delta is not None and delta.type == "text_end":
            # A message's annotations come as its text is done.
            i = delta.content_index
            cited = message.content[i]
            for c in cited.citations or () if isinstance(cited, TextContent) else ():
                out.append(encoder.feed(MessageUpdate(message, CitationAdded(i, c))))
        out.append(encoder.feed(event))
    return b"".join(out)


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


def _gemini_streamed_call(b: _Block) -> list[dict[str, Any]]:
    """A call scripted in pieces as Vertex AI streams one: a part naming it, one
    `partialArgs` part per argument value (the longest string cut so the parts number the
    pieces less one), a part closing it: each read back as one delta."""
    leaves: list[tuple[str, Any]] = []

    def walk(path: str, value: Any) -> None:
        if isinstance(value, dict | list) and value:
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                walk(path + _gemini_path_step(key), item)
        elif isinstance(value, dict | list):
            raise ValueError(f"vendor_bytes: partialArgs cannot say the empty {value!r} at {path}")
        else:
            leaves.append((path, value))

    walk("$", arguments(b, "google-generative-ai"))
    texts = [n for n, (_, v) in enumerate(leaves) if isinstance(v, str)]
    longest = max(texts, key=lambda n: len(leaves[n][1]), default=None)
    opened: dict[str, Any] = {"name": b.name, "id": b.id, "willContinue": True}
    out: list[dict[str, Any]] = [{"functionCall": opened}]
    if b.tool.get("thought_signature"):
        out[0]["thoughtSignature"] = b.tool["thought_signature"]
    for n, (path, value) in enumerate(leaves):
        if isinstance(value, str):
            count = 1 + max(len(b.pieces) - 1 - len(leaves), 0) if n == longest else 1
            count = max(min(count, len(value)), 1)
            cuts = [len(value) * k // count for k in range(count + 1)]
            pieces = [
                {"jsonPath": path, "stringValue": value[a:z], "willContinue": z < len(value)}
                for a, z in zip(cuts, cuts[1:], strict=False)
            ]
        elif isinstance(value, bool):
            pieces = [{"jsonPath": path, "boolValue": value}]
        elif value is None:
            pieces = [{"jsonPath": path, "nullValue": None}]
        else:
            pieces = [{"jsonPath": path, "numberValue": value}]
        out += [{"functionCall": {"partialArgs": [p], "willContinue": True}} for p in pieces]
    return [*out, {"functionCall": {}}]


def _gemini_path_step(key: str | int) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    if key and not set(key) & set(".[]'\"\\"):
        return f".{key}"
    if not set(key) & set("'\"\\"):
        return f"['{key}']"
    raise ValueError(f"vendor_bytes: a partialArgs jsonPath cannot name the key {key!r}")


def gemini(t: _Turn) -> bytes:
    # Server tool parts, files, vendor parts and grounding: the provider's own codec.
    codec: Any = importlib.import_module("stream_core.providers._gemini_parts")
    if t.container is not None:
        raise ValueError("vendor_bytes: google-generative-ai has no code-execution container")
    parts: list[dict[str, Any]] = []
    texts: list[tuple[str, Any]] = []  # answer texts and their citations, for grounding
    for b in t.blocks:
        said: list[dict[str, Any]]
        if b.kind in ("text", "thinking"):
            # One part a piece; the signature rides on the last.
            thought = {"thought": True} if b.kind == "thinking" else {}
            said = [{"text": p, **thought} for p in b.pieces or [""]]
            signature = b.text_signature if b.kind == "text" else b.signature
            if signature:
                said[-1]["thoughtSignature"] = signature
            if b.kind == "text":
                texts.append((b.text, b.citations))
        elif b.kind == "block":
            _gemini_can_say(b.data)
            part = codec.encode_block(b.data)  # None: candidate metadata, written below
            said = [] if part is None else [part]
        elif len(b.pieces) > 1:
            said = _gemini_streamed_call(b)
        else:
            call = {"id": b.id, "name": b.name, "args": arguments(b, "google-generative-ai")}
            said = [{"functionCall": call}]
            if b.tool.get("thought_signature"):
                said[0]["thoughtSignature"] = b.tool["thought_signature"]
        for part in said:
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
