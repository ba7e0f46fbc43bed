"""Token estimates without a tokenizer, so a harness can check a request fits before sending.

These are heuristics, deliberately a little generous: use them to decide whether to trim or
compact a history, never for billing. The exact counts arrive afterwards in `Usage`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._types import (
    AssistantMessage,
    Context,
    CustomMessage,
    ImageContent,
    Message,
    ServerTool,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    expand_message,
)

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "estimate_context_tokens",
    "estimate_message_tokens",
    "estimate_tokens",
    "fits_context",
]

IMAGE_TOKENS = 1_200
"""Flat charge per image: vendors bill by pixel area, which we don't decode; this is roughly a
1 megapixel image."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers and separators every vendor adds around each message."""

# Scripts a BPE tokenizer spends about one token per character on: Hangul Jamo, CJK radicals
# through Unified Ideographs (kana, Bopomofo, CJK punctuation and symbols in between), Hangul
# Jamo ext A, Hangul syllables, compatibility ideographs and forms, half/fullwidth forms, and
# the supplementary ideograph planes. Runs (`+`) keep the number of regex matches small.
_CJK_RUN = re.compile(
    r"[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
    r"\uff00-\uffef\U00020000-\U0003ffff]+"
)
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
# Indentation and blank lines tokenize into a few long whitespace tokens, so a run costs as
# much as one character.
_WHITESPACE_RUN = re.compile(r"\s{2,}", re.ASCII)


def estimate_tokens(text: str) -> int:
    """Estimated tokens in `text`: about 1 per CJK character (ideographs, kana, hangul,
    fullwidth forms), 1 per 2 other non-ASCII characters, and 1 per 4 ASCII characters with
    each whitespace run counted as one character; rounded up, 0 for "".

    An estimate, not a count: the exact numbers come from `Usage` after the call. O(len(text))
    in C regex code, with a fast path for ASCII text.
    """
    if text.isascii():
        return (len(_WHITESPACE_RUN.sub(" ", text)) + 3) // 4
    # Strip each class in turn; the length differences are the character counts.
    without_cjk = _CJK_RUN.sub("", text)
    cjk = len(text) - len(without_cjk)
    ascii_only = _NON_ASCII_RUN.sub("", without_cjk)
    other = len(without_cjk) - len(ascii_only)
    ascii_chars = len(_WHITESPACE_RUN.sub(" ", ascii_only))
    # Integer arithmetic for ceil(other / 2 + ascii_chars / 4): no float rounding surprises.
    return cjk + (2 * other + ascii_chars + 3) // 4


def _json_text(value: Any) -> str:
    """Compact JSON as a vendor would send it; never fails (this is only an estimate)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):  # e.g. non-string dict keys, circular data
        return str(value)


def _block_tokens(block: object) -> int:
    if isinstance(block, TextContent):
        return estimate_tokens(block.text)
    if isinstance(block, ImageContent):
        return IMAGE_TOKENS
    if isinstance(block, ThinkingContent):
        return estimate_tokens(block.thinking)
    if isinstance(block, ToolCall):
        return estimate_tokens(block.name) + estimate_tokens(_json_text(block.arguments))
    # A block we don't model (e.g. a raw dict from `model_construct`): count its JSON.
    return estimate_tokens(_json_text(block))


def estimate_message_tokens(message: Message | Mapping[str, Any]) -> int:
    """Estimated input tokens for one message, including `MESSAGE_OVERHEAD_TOKENS`.

    Counts text, thinking text, tool call names and JSON arguments, tool result content, and
    `IMAGE_TOKENS` per image. A record of a registered role counts as what it is sent as
    (its `to_messages()`, each with its overhead). A plain dict record (an unknown role kept
    from a history file) counts as its JSON text.
    """
    if isinstance(message, CustomMessage):
        return sum(estimate_message_tokens(m) for m in expand_message(message, "message"))
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            body = estimate_tokens(message.content)
        else:
            body = sum(_block_tokens(b) for b in message.content)
    elif isinstance(message, (AssistantMessage, ToolResultMessage)):
        body = sum(_block_tokens(b) for b in message.content)
    elif isinstance(message, Mapping):
        body = estimate_tokens(_json_text(dict(message)))
    else:  # defensive: an object outside the model
        body = estimate_tokens(_json_text(message))
    return MESSAGE_OVERHEAD_TOKENS + body


def _tool_tokens(tool: Tool | ServerTool) -> int:
    if isinstance(tool, ServerTool):
        return estimate_tokens(_json_text(tool.model_dump(mode="json")))
    return (
        estimate_tokens(tool.name)
        + estimate_tokens(tool.description)
        + estimate_tokens(_json_text(tool.parameters))
    )


def estimate_context_tokens(context: Context) -> int:
    """Estimated input tokens for a whole request: system prompt, messages (records of a
    registered role as their conversion), and tools."""
    total = estimate_tokens(context.system_prompt or "")
    total += sum(estimate_message_tokens(m) for m in context.messages)
    total += sum(_tool_tokens(t) for t in context.tools or ())
    return total


def fits_context(context: Context, model_context_window: int, max_output_tokens: int = 0) -> bool:
    """Whether the estimated input plus `max_output_tokens` fits the model's context window.

    Call it before sending, to decide whether to trim or compact a history:
    `fits_context(context, model.context_window, options.max_tokens or model.max_tokens)`.
    `max_output_tokens` is the room kept for the answer (0: input only). The input is
    `estimate_context_tokens(context)`, an estimate: leave some margin near the limit, and
    trim on a `context_overflow` error anyway.
    """
    return estimate_context_tokens(context) + max_output_tokens <= model_context_window
