"""A safe compaction cut: where a history can be cut so the part before it is replaced by a
summary, and the replacement itself.

The cut never separates a tool call from its result (every vendor rejects the next request
if one is missing), never drops the last user turn, and leaves the system prompt alone (it
lives on the `Context`, not in the messages). Sizes are the existing estimates
(`estimate_message_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._types import (
    AssistantMessage,
    Context,
    Message,
    ToolResultMessage,
    UserMessage,
    total_usage,
)
from .roles import CompactionSummary
from .tokens import estimate_message_tokens

__all__ = ["compact", "compaction_cut"]


def compaction_cut(messages: Sequence[Message], keep_tokens: int) -> int:
    """The index to cut `messages` at: `messages[:i]` may be summarized, `messages[i:]` are
    kept. The kept part is the longest tail that fits `keep_tokens` (estimated), moved
    earlier until no tool call is kept without its results nor a result without its call,
    and never later than the last user message. 0: nothing can be cut."""
    if isinstance(keep_tokens, bool) or not isinstance(keep_tokens, int) or keep_tokens < 0:
        raise ValueError(f"keep_tokens must be an int of at least 0, not {keep_tokens!r}")
    cut = len(messages)
    kept = 0
    while cut > 0:
        size = estimate_message_tokens(messages[cut - 1])
        if kept + size > keep_tokens:
            break
        kept += size
        cut -= 1
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=0)
    cut = min(cut, last_user)
    while cut > 0 and _splits_a_pair(messages, cut):
        cut -= 1
    return cut


def _splits_a_pair(messages: Sequence[Message], cut: int) -> bool:
    """Whether cutting before `messages[cut]` separates a call from its result: the first
    kept message is a result (its call is before the cut), or a message before the cut
    holds a call whose result is kept."""
    if isinstance(messages[cut], ToolResultMessage):
        return True
    kept_results = {m.tool_call_id for m in messages[cut:] if isinstance(m, ToolResultMessage)}
    if not kept_results:
        return False
    for m in messages[:cut]:
        if isinstance(m, AssistantMessage) and any(c.id in kept_results for c in m.tool_calls()):
            return True
    return False


def compact(context: Context, summary: str, keep_tokens: int) -> Context:
    """A new context whose messages before `compaction_cut(..., keep_tokens)` are one
    `CompactionSummary` of `summary` (written by the harness, e.g. by a model asked to
    summarize them), carrying their estimated size and their summed usage and cost, so
    `total_usage` over the new history still counts every call. The system prompt and tools
    are kept; the caller's context is not changed. Nothing to cut: a copy of `context`."""
    messages = list(context.messages)
    cut = compaction_cut(messages, keep_tokens)
    if cut == 0:
        return context.model_copy(update={"messages": messages})
    removed = messages[:cut]
    record = CompactionSummary(
        summary=summary,
        tokens_before=sum(estimate_message_tokens(m) for m in removed),
        usage=total_usage(removed),
    )
    return context.model_copy(update={"messages": [record, *messages[cut:]]})
