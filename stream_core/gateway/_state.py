"""State carriers: what a foreign upstream needs back, riding in the client's own history.

A model's answer holds state the client's dialect has no field for: Gemini's thought
signatures, OpenAI's encrypted reasoning and item ids, Anthropic's thinking signatures
when the client speaks Chat Completions, the `raw` of server-tool blocks. The gateway packs
the answer's content (with the api, provider and model that wrote it) into one opaque
string, signed with the gateway's secret, and the dialect's encoder hands it to the client
in a field the client sends back unchanged (`stream_core.provider.CARRIER_PREFIX`). On the
next turn the codec's parser finds it (`Inbound.carriers`) and `restore` puts the answer
back as the upstream wrote it, so `prepare_messages` sends every signature again.

A carrier whose signature does not verify (another gateway's secret, an edited string) is
ignored: the message is read from what the client sent, as any foreign history is.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import zlib
from typing import Any

from stream_core import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage
from stream_core.provider import CARRIER_PREFIX

__all__ = ["pack", "restore", "unpack"]

_MAC_BYTES = 16


def pack(message: AssistantMessage, secret: bytes) -> str | None:
    """`message`'s content and origin as a carrier, or None when it holds nothing a
    client's copy would lose (only plain text and thinking without signatures, and tool
    calls with no vendor state)."""
    if not _has_state(message):
        return None
    data: dict[str, Any] = {
        "api": message.api,
        "provider": message.provider,
        "model": message.model,
        "content": [b.model_dump(mode="json") for b in message.content],
    }
    if message.container:
        data["container"] = message.container
    raw = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 6)
    mac = hmac.new(secret, raw, hashlib.sha256).digest()[:_MAC_BYTES]
    return CARRIER_PREFIX + base64.urlsafe_b64encode(mac + raw).decode().rstrip("=")


def unpack(carrier: str, secret: bytes) -> dict[str, Any] | None:
    """The packed answer, or None when `carrier` is not one this secret signed."""
    if not carrier.startswith(CARRIER_PREFIX):
        return None
    text = carrier[len(CARRIER_PREFIX) :]
    try:
        blob = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    mac, raw = blob[:_MAC_BYTES], blob[_MAC_BYTES:]
    if not hmac.compare_digest(mac, hmac.new(secret, raw, hashlib.sha256).digest()[:_MAC_BYTES]):
        return None
    try:
        data = json.loads(zlib.decompressobj().decompress(raw, 8 << 20))
    except (ValueError, zlib.error):
        return None
    return data if isinstance(data, dict) else None


def restore(messages: list[Message], carriers: dict[int, str], secret: bytes) -> list[Message]:
    """`messages` with each carried assistant message put back as its upstream wrote it.

    The client's copy decides what is said (its text, where it edited it); the carrier
    gives what it could not hold (signatures, ids, raw vendor blocks) and the message's
    origin. A carrier whose tool calls do not match the client's copy is ignored."""
    if not carriers:
        return messages
    out = list(messages)
    renamed: dict[str, str] = {}
    for index, carrier in carriers.items():
        original = out[index] if 0 <= index < len(out) else None
        data = unpack(carrier, secret)
        if data is None or not isinstance(original, AssistantMessage):
            continue
        try:
            stored = AssistantMessage.model_validate(
                {
                    "api": data["api"],
                    "provider": data["provider"],
                    "model": data["model"],
                    "content": data["content"],
                    "container": data.get("container"),
                    "usage": original.usage.model_dump(),
                    "stop_reason": original.stop_reason,
                    "timestamp": original.timestamp,
                }
            )
        except (KeyError, ValueError):
            continue
        calls = [b for b in original.content if isinstance(b, ToolCall)]
        kept = [b for b in stored.content if isinstance(b, ToolCall)]
        if len(calls) != len(kept) or any(
            a.name != b.name for a, b in zip(calls, kept, strict=False)
        ):
            continue
        for mine, theirs in zip(calls, kept, strict=False):
            if mine.id != theirs.id:
                renamed[mine.id] = theirs.id
            theirs.arguments = mine.arguments
        texts = [b for b in original.content if isinstance(b, TextContent)]
        stored_texts = [b for b in stored.content if isinstance(b, TextContent)]
        if len(texts) == len(stored_texts):
            for mine_text, theirs_text in zip(texts, stored_texts, strict=False):
                theirs_text.text = mine_text.text
        out[index] = stored
    if renamed:
        for i, m in enumerate(out):
            if isinstance(m, ToolResultMessage) and m.tool_call_id in renamed:
                out[i] = m.model_copy(update={"tool_call_id": renamed[m.tool_call_id]})
    return out


def _has_state(message: AssistantMessage) -> bool:
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text_signature or block.citations:
                return True
        elif isinstance(block, ToolCall):
            if block.thought_signature or block.raw or block.caller or block.builtin:
                return True
        elif block.type == "thinking":
            if getattr(block, "signature", None) or getattr(block, "redacted", False):
                return True
        else:
            return True
    return bool(message.container)
