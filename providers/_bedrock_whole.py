"""Bedrock's whole `Converse` answer for a message: the inverse of `bedrock._parse_response`.

A batch job's result line carries the answer a `Converse` call gives (`modelOutput`):
`output.message.content` (text, citations, reasoning, tool calls and the other blocks, in
the same shapes the request builder sends an assistant message in), the `stopReason`, the
`usage` (cache reads and writes included, server tools by Nova's names) and `metrics`. The
fake vendor writes results with it, and the round-trip tests hold it to the reader.
Every word comes from the provider's tables: the stop table read backwards, the usage
fields of `_bedrock_blocks`.
"""

from __future__ import annotations

from typing import Any

from stream_core import AssistantMessage, Model, TextContent, ThinkingContent, ToolCall

from ._bedrock_blocks import assistant_block, text_block, usage_record
from .bedrock import WIRE

__all__ = ["answer_body", "stop_word"]


def stop_word(message: AssistantMessage) -> str:
    """Converse's `stopReason` for the message: its own word when it came from Converse,
    else the first of the stop table that reads back as its stop (or its error's kind)."""
    table = WIRE.stop_reasons
    raw = message.raw_stop_reason
    if raw is not None and raw in table:
        return raw
    rule: str = message.stop_reason
    if rule in ("error", "aborted") and message.error is not None:
        rule = message.error.kind or "server"
    if rule == "stop" and any(isinstance(b, ToolCall) for b in message.content):
        rule = "tool_use"
    for want in (rule, "stop"):
        for word, means in table.items():
            if means == want:
                return word
    raise AssertionError("the Converse stop table has no word for 'stop'")  # pragma: no cover


def _content(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for i, b in enumerate(message.content):
        if isinstance(b, TextContent):
            blocks.append(text_block(b))
        elif isinstance(b, ThinkingContent):
            if b.redacted:
                blocks.append({"reasoningContent": {"redactedContent": b.signature or ""}})
                continue
            reasoning: dict[str, Any] = {"text": b.thinking}
            if b.signature:
                reasoning["signature"] = b.signature
            blocks.append({"reasoningContent": {"reasoningText": reasoning}})
        elif isinstance(b, ToolCall):
            blocks.append({"toolUse": {"toolUseId": b.id, "name": b.name, "input": b.arguments}})
        else:
            block = assistant_block(b, f"message.content[{i}]")
            if block is not None:  # an UnknownContent: Converse has nothing to say it with
                blocks.append(block)
    return blocks


def answer_body(message: AssistantMessage, model: Model) -> dict[str, Any]:
    """The `Converse` answer for `message` (`ValueError` for a block Converse cannot say)."""
    u = message.usage
    counts = {"input": u.input, "output": u.output, "cache_read": u.cache_read}
    counts["cache_write"] = u.cache_write
    return {
        "output": {"message": {"role": "assistant", "content": _content(message)}},
        "stopReason": stop_word(message),
        "usage": usage_record(counts, dict(u.server_tools or {})),
        "metrics": {"latencyMs": max(int(message.duration_ms or 0), 0)},
    }
