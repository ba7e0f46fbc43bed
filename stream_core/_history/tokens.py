"""Token estimates without a tokenizer, so a harness can check a request fits before sending.

These are heuristics, deliberately a little generous: use them to decide whether to trim or
compact a history, never for billing. The exact counts arrive afterwards in `Usage`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._blocks import _TEXT_CAP
from .._types import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Context,
    CustomMessage,
    FileContent,
    ImageContent,
    Message,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
    VendorContent,
    expand_message,
)
from .handoff import cited_text

__all__ = [
    "FILE_TOKENS",
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

FILE_TOKENS = 1_600
"""Least charge per file sent (`FileContent` in a user message or tool result), and the
whole charge for one sent by reference (`url`, `file_id`: its size is unknown here): about
one PDF page, which vendors bill as its text plus an image of the page. A file sent as data
costs more when it is larger: `FILE_BYTES_PER_TOKEN`."""

FILE_BYTES_PER_TOKEN = 4
"""A file's decoded bytes per token: a text file's bytes are its characters, and a PDF's
extracted text and page images come to the same order (generous for image-heavy files)."""

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
        if block.citations:
            # Sent to another vendor with its sources written out (`cited_text`); to the
            # same vendor as its records, of about that size.
            return estimate_tokens(cited_text(block))
        return estimate_tokens(block.text)
    if isinstance(block, ImageContent):
        return IMAGE_TOKENS
    if isinstance(block, ThinkingContent):
        return estimate_tokens(block.thinking)
    if isinstance(block, ToolCall):
        tokens = estimate_tokens(block.name) + estimate_tokens(_json_text(block.arguments))
        if block.raw is not None:
            tokens = max(tokens, estimate_tokens(_json_text(block.raw)))
        return tokens
    return _other_block_tokens(block)


def _other_block_tokens(block: object) -> int:
    """The blocks of issue 35, each counted as what is sent back.

    A vendor record with `raw` (a server call or result, an approval request) goes back to
    its own vendor as that JSON, encrypted payloads included (Anthropic bills a web search's
    encrypted results as input on the next turn), so the larger of `raw` and the readable
    form (what another vendor gets) is counted. A derived reading (`raw` None) is its text
    and sources."""
    if isinstance(block, FileContent):
        return _file_tokens(block)
    if isinstance(block, (ServerToolCall, ServerToolResult, ApprovalRequest)):
        readable = estimate_tokens(block.as_text())
        # `as_text` shows the start of long inputs and texts: the rest is sent too.
        if isinstance(block, ServerToolCall):
            readable = max(readable, estimate_tokens(_json_text(block.input)))
        elif isinstance(block, ServerToolResult) and len(block.text) > _TEXT_CAP:
            readable += estimate_tokens(block.text[_TEXT_CAP:])
        if block.raw is None:
            return readable
        return max(readable, estimate_tokens(_json_text(block.raw)))
    if isinstance(block, VendorContent):
        return estimate_tokens(_json_text(block.data))
    if isinstance(block, ApprovalResponse):
        return estimate_tokens(block.as_text())
    if isinstance(block, UnknownContent):
        return estimate_tokens(_json_text(block.root))  # never sent; counted to be safe
    # A block we don't model (e.g. a raw dict from `model_construct`): count its JSON.
    return estimate_tokens(_json_text(block))


def _file_tokens(block: FileContent) -> int:
    """A file sent as data: `FILE_BYTES_PER_TOKEN` of its decoded size, at least
    `FILE_TOKENS` (an image: `IMAGE_TOKENS`, as an `ImageContent`); by reference:
    `FILE_TOKENS`. In an assistant message (made by the vendor) it is the note another
    vendor gets: see `estimate_message_tokens`."""
    if block.mime_type is not None and block.mime_type.startswith("image/"):
        return IMAGE_TOKENS
    if block.data is None:
        return FILE_TOKENS
    return max(FILE_TOKENS, len(block.data) * 3 // 4 // FILE_BYTES_PER_TOKEN)


def _assistant_block_tokens(block: object) -> int:
    if isinstance(block, FileContent):
        # A file the vendor made is not sent back as data: its own vendor keeps it (a file
        # id, or the call that made it), another gets a note.
        return estimate_tokens(block.as_text())
    return _block_tokens(block)


def estimate_message_tokens(message: Message | Mapping[str, Any]) -> int:
    """Estimated input tokens for one message, including `MESSAGE_OVERHEAD_TOKENS`.

    Counts text (with its citations' sources), thinking text, tool call names and JSON
    arguments, tool result content, `IMAGE_TOKENS` per image, files by their size
    (`FILE_TOKENS`, `FILE_BYTES_PER_TOKEN`; a file the model made as the note sent in its
    place), and server tool calls, results and vendor blocks as the JSON sent back to
    their vendor (encrypted payloads included) or the text another vendor gets, whichever
    is larger. A record of a registered role counts as what it is sent as
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
    elif isinstance(message, AssistantMessage):
        body = sum(_assistant_block_tokens(b) for b in message.content)
    elif isinstance(message, ToolResultMessage):
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
