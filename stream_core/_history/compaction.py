"""A safe compaction cut: where a history can be cut so the part before it is replaced by a
summary, and the replacement itself.

The cut never separates a tool call from its result (every vendor rejects the next request
if one is missing), nor a server tool call from its result in a later message, nor an
approval request from its answer; it never drops the last user turn, and leaves the
system prompt alone (it lives on the `Context`, not in the messages). Sizes are the
existing estimates (`estimate_message_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._types import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Context,
    CustomMessage,
    Message,
    ModelMessage,
    ServerToolCall,
    ServerToolResult,
    ToolResultMessage,
    UserMessage,
    expand_message,
    total_usage,
)
from .roles import CompactionSummary
from .tokens import estimate_message_tokens

__all__ = ["compact", "compaction_cut"]


def compaction_cut(messages: Sequence[Message], keep_tokens: int) -> int:
    """The index to cut `messages` at: `messages[:i]` may be summarized, `messages[i:]` are
    kept. The kept part is the longest tail that fits `keep_tokens` (estimated), moved
    earlier until no tool call is kept without its results nor a result without its call
    (server tool calls and their results included), and never later than the last user
    message. A record of a registered role counts as what it is sent as (`to_messages()`):
    a call or a result. Linear in the history. 0: nothing can be cut."""
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
    sent = [_sent_as(m, i) for i, m in enumerate(messages)]
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=0)
    cut = min(cut, last_user)
    reach = _pair_reach(sent)
    # A cut splits a pair when the first kept message is a result (its call is before the
    # cut), or when a call before the cut has a result at or after it.
    while cut > 0 and (_opens_with_result(sent[cut]) or reach[cut] < cut):
        cut -= 1
    return cut


def _sent_as(message: Message, index: int) -> list[ModelMessage]:
    if isinstance(message, CustomMessage):
        return expand_message(message, f"messages[{index}]")
    return [message]


def _opens_with_result(forms: list[ModelMessage]) -> bool:
    return bool(forms) and isinstance(forms[0], ToolResultMessage)


def _pair_reach(sent: list[list[ModelMessage]]) -> list[int]:
    """`reach[k]`: the earliest message holding a call whose result is at `k` or later
    (`len(sent)` when there is none): cutting at `k` splits a pair when `reach[k] < k`. One
    pass to find each call id's first message, one for the results, one for the suffix
    minimum."""
    first_call: dict[str, int] = {}
    first_server_call: dict[str, int] = {}
    first_request: dict[str, int] = {}
    for i, forms in enumerate(sent):
        for form in forms:
            if isinstance(form, AssistantMessage):
                for call in form.tool_calls():
                    first_call.setdefault(call.id, i)
                for block in form.content:
                    if isinstance(block, ServerToolCall):
                        first_server_call.setdefault(block.id, i)
                    elif isinstance(block, ApprovalRequest):
                        first_request.setdefault(block.id, i)
    n = len(sent)
    reach = [n] * (n + 1)
    for i, forms in enumerate(sent):
        for form in forms:
            if isinstance(form, ToolResultMessage):
                at = first_call.get(form.tool_call_id, n)
                if at < i:
                    reach[i] = min(reach[i], at)
            if first_request and isinstance(form, (UserMessage, ToolResultMessage)):
                # An approval answers a request of an earlier turn: `stream()` refuses an
                # answer whose request is gone, so they are kept or cut together.
                for part in form.content if isinstance(form.content, list) else ():
                    if isinstance(part, ApprovalResponse):
                        at = first_request.get(part.request_id, n)
                        if at < i:
                            reach[i] = min(reach[i], at)
            elif first_server_call and isinstance(form, AssistantMessage):
                # A server result in a later message than its call (a paused turn
                # continued): the vendor needs both, so they are kept or cut together.
                for block in form.content:
                    if isinstance(block, ServerToolResult):
                        at = first_server_call.get(block.call_id, n)
                        if at < i:
                            reach[i] = min(reach[i], at)
    for k in range(n - 1, -1, -1):
        reach[k] = min(reach[k], reach[k + 1])
    return reach


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
