"""Cross-provider handoff: make a history written by any model sendable to the target one.

Vendor artifacts (signatures, redacted reasoning, id formats) only mean something to the
model that produced them; another vendor rejects or misreads them. Every request builder
runs its history through `prepare_messages` first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .._tools import repair_tool_pairs
from .._types import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantContent,
    AssistantMessage,
    Context,
    CustomMessage,
    ModelMessage,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
    VendorContent,
    expand_messages,
)

__all__ = [
    "APPROVAL_APIS",
    "IMAGE_OMITTED_TEXT",
    "cited_text",
    "id_normalizer",
    "is_same_model",
    "prepare_messages",
    "sanitize_surrogates",
    "server_pair_text",
]

_SURROGATE = re.compile("[\ud800-\udfff]")

IMAGE_OMITTED_TEXT = "(image omitted: this model takes no images)"
"""What every provider sends in place of an image to a model without image input."""

# Enough for any realistic pile-up of colliding ids; past it the normalizer cannot yield
# new ids (for instance it maps every input to one constant) and looping would never end.
_MAX_SUFFIX_ATTEMPTS = 10_000


def sanitize_surrogates(text: str) -> str:
    """`text` without lone UTF-16 surrogates, which cannot be encoded as UTF-8 JSON.

    A high+low pair (as left by some decoders) is first joined into its astral character,
    so an emoji split into halves survives.
    """
    if _SURROGATE.search(text) is None:
        return text
    # The round trip through UTF-16 joins adjacent pairs; lone halves come back unchanged.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub("", joined)


def id_normalizer(*, allowed: str = r"A-Za-z0-9_-", max_length: int = 64) -> Callable[[str], str]:
    """A function mapping a tool-call id to one a vendor accepts: characters outside the
    class `allowed` (regex character-class syntax) become `_`, then the id is cut to
    `max_length`."""
    if max_length < 1:
        raise ValueError("max_length must be at least 1")
    outside = re.compile(f"[^{allowed}]")

    def normalize(tool_call_id: str) -> str:
        return outside.sub("_", tool_call_id)[:max_length]

    return normalize


def is_same_model(message: AssistantMessage, *, api: str, provider: str, model_id: str) -> bool:
    """Whether `message` was written by the target model over the target API, so its vendor
    artifacts can be sent back as they are."""
    return message.provider == provider and message.api == api and message.model == model_id


class _IdMap:
    """Tool-call ids as sent: every call gets a non-empty id unique in the request (a
    history written by an older version, or spliced from several sessions, may hold empty or
    repeated ones), and each result follows the call it answers."""

    def __init__(self, normalize: Callable[[str], str] | None) -> None:
        self._normalize = normalize
        self._taken: set[str] = set()
        # Original id -> (turn, id sent) of the calls still waiting for their result.
        self._waiting: dict[str, list[tuple[int, str]]] = {}

    def for_call(self, original: str, turn: int, position: int) -> str:
        candidate = self._normal(original) if original else ""
        if not candidate:
            # Deterministic: the same history always sends the same ids.
            candidate = self._normal(f"call_{turn}_{position}")
        new = self._unique(candidate)
        self._taken.add(new)
        self._waiting.setdefault(original, []).append((turn, new))
        return new

    def for_result(self, original: str) -> str | None:
        """The id sent for the call this result answers (the first waiting call of the
        latest turn that made one with this id); None when no call is waiting for it."""
        waiting = self._waiting.get(original)
        if not waiting:
            return None
        latest = waiting[-1][0]
        at = next(i for i, (turn, _) in enumerate(waiting) if turn == latest)
        return waiting.pop(at)[1]

    def _normal(self, tool_call_id: str) -> str:
        return self._normalize(tool_call_id) if self._normalize is not None else tool_call_id

    def _unique(self, candidate: str) -> str:
        if candidate not in self._taken:
            return candidate
        for attempt in range(2, _MAX_SUFFIX_ATTEMPTS):
            suffix = f"_{attempt}"
            base = candidate
            # Shorten the base until the suffix survives the normalizer's length cut.
            while True:
                new = self._normal(base + suffix)
                if new.endswith(suffix) or not base:
                    break
                base = base[:-1]
            if new and new not in self._taken:
                return new
        raise ValueError(f"cannot make tool-call id {candidate!r} unique with this normalizer")


def prepare_messages(
    context: Context,
    *,
    api: str,
    provider: str,
    model_id: str,
    normalize_id: Callable[[str], str] | None = None,
) -> list[ModelMessage]:
    """The context's messages as the target model may receive them, in a new list.

    Assistant turns from another model lose vendor artifacts (their reasoning becomes
    plain text); tool-call ids go through `normalize_id`, are made non-empty and unique in
    the request (a history may hold empty or repeated ones), and results follow their call;
    finally call/result pairing is repaired. Records of a registered role are their
    conversion (`stream()` has already converted them; a context built by hand may still
    hold some). The context is never mutated: changed messages and blocks are copies.
    """
    ids = _IdMap(normalize_id)
    approvals: set[str] = set()  # the approval requests sent as the vendor's own items
    out: list[ModelMessage] = []
    for turn, message in enumerate(expand_messages(context.messages, "context.messages")):
        if isinstance(message, AssistantMessage):
            prepared = _prepare_assistant(message, turn, ids, api, provider, model_id)
            approvals.update(b.id for b in prepared.content if isinstance(b, ApprovalRequest))
            out.append(prepared)
        elif isinstance(message, ToolResultMessage):
            sent = ids.for_result(message.tool_call_id)
            if sent is None:
                # No earlier call has this id: an orphan that repair would drop anyway.
                # Dropping it here keeps it from pairing with a call whose id was rewritten
                # into its own.
                continue
            if sent != message.tool_call_id:
                message = message.model_copy(update={"tool_call_id": sent})
            out.append(_prepare_user(message, api, approvals))
        elif isinstance(message, UserMessage):
            out.append(_prepare_user(message, api, approvals))
        else:
            out.append(message)
    # The repair adds built-in messages only.
    return [m for m in repair_tool_pairs(out).messages if not isinstance(m, CustomMessage)]


def _prepare_assistant(
    message: AssistantMessage, turn: int, ids: _IdMap, api: str, provider: str, model_id: str
) -> AssistantMessage:
    same = is_same_model(message, api=api, provider=provider, model_id=model_id)
    same_api = message.api == api and message.provider == provider
    content: list[AssistantContent] = []
    changed = False
    # Server calls handed over as text: call id -> (position of that text, the call), so
    # the result that follows joins it in one compact note.
    as_text: dict[str, tuple[int, ServerToolCall]] = {}
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if same:
                content.append(block)
            elif not block.redacted and block.thinking.strip():
                # Another vendor cannot verify the signature, but the reasoning still helps.
                content.append(TextContent(text=block.thinking))
                changed = True
            else:
                # Redacted reasoning is an opaque payload only its author can read.
                changed = True
        elif isinstance(block, TextContent):
            if same or (same_api and block.citations):
                content.append(block)
            else:
                content.append(TextContent(text=cited_text(block)))
                changed = True
        elif isinstance(block, UnknownContent):
            changed = True  # kept in the history, never sent: no vendor form is known
        elif isinstance(block, ToolCall):
            update: dict[str, object] = {}
            new_id = ids.for_call(block.id, turn, len(content))
            if new_id != block.id:
                update["id"] = new_id
            if not same and block.thought_signature is not None:
                update["thought_signature"] = None
            if not same_api and (block.caller or block.builtin or block.raw):
                # Another vendor has no such item: a plain call of the same name.
                update.update(caller=None, builtin=None, raw=None)
            if update:
                block = block.model_copy(update=update)
                changed = True
            content.append(block)
        elif same_api:
            content.append(block)  # the vendor's own record goes back as it came
        else:
            # A server call, result, approval request, generated file or vendor block:
            # text another vendor can read, keeping the sources.
            changed = True
            if isinstance(block, ServerToolResult) and block.call_id in as_text:
                at, call = as_text.pop(block.call_id)
                content[at] = TextContent(text=server_pair_text(call, block))
                continue
            if isinstance(block, ServerToolCall) and block.id:
                as_text[block.id] = (len(content), block)
            content.append(TextContent(text=block.as_text()))
    if not changed:
        return message
    return message.model_copy(update={"content": content})


def server_pair_text(call: ServerToolCall, result: ServerToolResult) -> str:
    """A server call and its result as one note for another vendor: what was run, with
    what, and what came back (sources as `title <url>`, output, exit code)."""
    head = call.as_text()[: -len("]")]
    if result.is_error:
        head += " (error)"
    lines = result.as_text().split("\n")[1:]  # the result's own header is the call's
    return "\n".join([head + "]", *lines])


def cited_text(block: TextContent) -> str:
    """A text block's text with its citations written out after it (URL, title, cited
    text), for a model that cannot take the vendor's citation records."""
    if not block.citations:
        return block.text
    lines = []
    for c in block.citations:
        line = c.label()
        if c.cited_text:
            quoted = c.cited_text if len(c.cited_text) <= 300 else c.cited_text[:300] + "..."
            line = f'{line}: "{quoted}"' if line else f'"{quoted}"'
        if line and line not in lines:
            lines.append(line)
    if not lines:
        return block.text
    return block.text + " [sources: " + "; ".join(lines) + "]"


def _prepare_user(
    message: UserMessage | ToolResultMessage, api: str, approvals: set[str]
) -> ModelMessage:
    """Vendor blocks of another API, and approval answers to no request sent as the
    vendor's own item (`approvals`: asked by another vendor, or by none here), become
    text."""
    if isinstance(message.content, str):
        return message
    if not any(isinstance(b, (VendorContent, ApprovalResponse)) for b in message.content):
        return message
    content: list[Any] = []
    for b in message.content:
        if isinstance(b, VendorContent) and b.api != api:
            content.append(TextContent(text=b.as_text()))
        elif isinstance(b, ApprovalResponse) and (
            api not in APPROVAL_APIS or b.request_id not in approvals
        ):
            content.append(TextContent(text=b.as_text()))
        else:
            content.append(b)
    return message.model_copy(update={"content": content})


APPROVAL_APIS = frozenset({"openai-responses"})
"""The APIs that take an `ApprovalResponse` as the vendor's own item."""
