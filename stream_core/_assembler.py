"""The one place that builds an `AssistantMessage` from vendor deltas.

Providers translate vendor events into keyword calls keyed by the vendor's own block key
(Anthropic `index`, an OpenAI tool call's `index`/`id`, a constant for text): `text()`,
`thinking()`, `tool_call()`, `end()`. The assembler alone allocates `content_index`,
emits `*_start`/`*_delta`/`*_end`, keeps usage, applies the stop-reason rules and
truncation flags, and closes whatever is open when the stream ends. Ending a block retires
its key, so a key seen again starts a new block and interleaved blocks never merge.

Cost per delta is O(len(delta)): text is appended to the block in place (the string is
taken out of the model's `__dict__` so CPython can grow it without a copy), argument
fragments go to `partial_json` the same way, and JSON is parsed once, at the block's end.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Hashable, Mapping
from typing import Literal

from ._events import (
    AssistantStreamEvent,
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
from ._json import ArgumentsError, parse_arguments, parse_partial_json
from ._models import Model
from ._types import (
    AssistantMessage,
    Cost,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)

__all__ = ["Assembler", "StopRule", "compute_cost"]

logger = logging.getLogger("stream_core")

StopRule = Literal["stop", "length", "tool_use", "refusal", "content_filter"]
"""What a vendor stop value means; `refusal`/`content_filter` end the message as `error`."""

_TEXT, _THINKING, _TOOL = 0, 1, 2
_warned_unknown: set[tuple[str, str]] = set()


class _Open:
    __slots__ = ("block", "index", "kind")

    def __init__(self, kind: int, index: int, block: TextContent | ThinkingContent | ToolCall):
        self.kind = kind
        self.index = index
        self.block = block


class Assembler:
    """Builds one message; events go to `out`, which the stream drains."""

    def __init__(
        self,
        message: AssistantMessage,
        model: Model,
        stop_reasons: Mapping[str, StopRule],
        out: deque[AssistantStreamEvent],
    ) -> None:
        self.message = message
        self.model = model
        self.out = out
        self._stop_reasons = stop_reasons
        self._open: dict[Hashable, _Open] = {}
        self._stop_detail: str | None = None
        self._stop_rule: StopRule | None = None
        self.finished = False
        """The vendor's terminal event arrived."""
        self.updated = False
        """At least one `message_update` was emitted (no retry after that)."""
        self.first_update: float | None = None
        """`time.perf_counter()` at the first `message_update` (taken once, per block start)."""

    # --- blocks -------------------------------------------------------------------------

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def block(self, key: Hashable) -> TextContent | ThinkingContent | ToolCall | None:
        o = self._open.get(key)
        return o.block if o is not None else None

    def _start(
        self, key: Hashable, kind: int, block: TextContent | ThinkingContent | ToolCall
    ) -> _Open:
        if key in self._open:
            self.end(key)
        content = self.message.content
        o = _Open(kind, len(content), block)
        content.append(block)
        self._open[key] = o
        delta = (TextStart, ThinkingStart, ToolCallStart)[kind](o.index)
        self.out.append(MessageUpdate(self.message, delta))
        if not self.updated:
            self.first_update = time.perf_counter()
        self.updated = True
        return o

    def start_text(self, key: Hashable) -> None:
        self._start(key, _TEXT, TextContent())

    def text(self, key: Hashable, delta: str) -> None:
        """Append text to the block under `key`, starting one if needed. Empty deltas are
        dropped (they would start empty blocks)."""
        if not delta:
            return
        o = self._open.get(key)
        if o is None or o.kind != _TEXT:
            o = self._start(key, _TEXT, TextContent())
        d = o.block.__dict__
        text = d.pop("text")
        text += delta
        d["text"] = text
        self.out.append(MessageUpdate(self.message, TextDelta(o.index, delta)))

    def start_thinking(
        self, key: Hashable, *, signature: str | None = None, redacted: bool = False
    ) -> None:
        self._start(key, _THINKING, ThinkingContent(signature=signature, redacted=redacted))

    def thinking(self, key: Hashable, delta: str, *, signature: str | None = None) -> None:
        if not delta:
            return
        o = self._open.get(key)
        if o is None or o.kind != _THINKING:
            o = self._start(key, _THINKING, ThinkingContent(signature=signature))
        d = o.block.__dict__
        text = d.pop("thinking")
        text += delta
        d["thinking"] = text
        self.out.append(MessageUpdate(self.message, ThinkingDelta(o.index, delta)))

    def thinking_signature(self, key: Hashable, fragment: str) -> None:
        """Append to the signature of an open thinking block (no event: it is not text)."""
        o = self._open.get(key)
        if o is not None and isinstance(o.block, ThinkingContent):
            o.block.signature = (o.block.signature or "") + fragment

    def start_tool_call(self, key: Hashable, *, id: str, name: str) -> None:
        self._start(key, _TOOL, ToolCall(id=id, name=name))

    def tool_call(
        self, key: Hashable, fragment: str, *, id: str | None = None, name: str | None = None
    ) -> None:
        """Append an argument fragment to the call under `key`, starting one if needed.

        A different non-empty `id` under a key that is open means a new call (servers that
        reuse index 0 for every parallel call): the open one is ended first.
        """
        o = self._open.get(key)
        if o is not None and o.kind == _TOOL and id:
            current = o.block.id  # type: ignore[union-attr]
            if current and current != id:
                o = None
        if o is None or o.kind != _TOOL:
            o = self._start(key, _TOOL, ToolCall(id=id or "", name=name or ""))
        else:
            call = o.block
            assert isinstance(call, ToolCall)
            if id and not call.id:
                call.id = id
            if name and call.name != name:
                call.name = name
        d = o.block.__dict__
        buf = d.pop("partial_json")
        buf += fragment
        d["partial_json"] = buf
        self.out.append(MessageUpdate(self.message, ToolCallDelta(o.index, fragment)))

    def end(self, key: Hashable) -> None:
        """End the block under `key` (unknown keys are ignored: skipped vendor blocks)."""
        o = self._open.pop(key, None)
        if o is None:
            return
        if o.kind == _TEXT:
            delta: TextEnd | ThinkingEnd | ToolCallEnd = TextEnd(o.index)
        elif o.kind == _THINKING:
            delta = ThinkingEnd(o.index)
        else:
            _finish_arguments(o.block)  # type: ignore[arg-type]
            delta = ToolCallEnd(o.index)
        self.out.append(MessageUpdate(self.message, delta))

    def end_all(self) -> None:
        for key in sorted(self._open, key=lambda k: self._open[k].index):
            self.end(key)

    # --- message-level facts ------------------------------------------------------------

    def set_response_model(self, value: object) -> None:
        """Record the model id the vendor says it served; anything but a non-empty string
        (vendor bytes are untrusted) is ignored."""
        if isinstance(value, str) and value:
            self.message.response_model = value

    def set_stop_reason(
        self, raw: str | None, *, detail: str | None = None, rule: StopRule | None = None
    ) -> None:
        """Record the vendor's stop value (kept verbatim); `rule` overrides the table when
        the vendor says more elsewhere (e.g. a refusal field next to `stop`)."""
        if raw is not None:
            self.message.raw_stop_reason = raw
        if detail:
            self._stop_detail = detail
        if rule is not None:
            self._stop_rule = rule

    def set_usage(
        self,
        *,
        input: int | None = None,
        output: int | None = None,
        cache_read: int | None = None,
        cache_write: int | None = None,
        reasoning: int | None = None,
    ) -> None:
        """Replace the given fields (a cumulative snapshot); None keeps what we had."""
        u = self.message.usage
        if input is not None:
            u.input = input
        if output is not None:
            u.output = output
        if cache_read is not None:
            u.cache_read = cache_read
        if cache_write is not None:
            u.cache_write = cache_write
        if reasoning is not None:
            u.reasoning = reasoning
        self._recount()

    def add_usage(
        self,
        *,
        input: int = 0,
        output: int = 0,
        cache_read: int = 0,
        cache_write: int = 0,
        reasoning: int = 0,
    ) -> None:
        """Add the given fields (a vendor that reports deltas)."""
        u = self.message.usage
        u.input += input
        u.output += output
        u.cache_read += cache_read
        u.cache_write += cache_write
        u.reasoning += reasoning
        self._recount()

    def _recount(self) -> None:
        u = self.message.usage
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write
        u.cost = compute_cost(self.model, u)

    # --- the end ------------------------------------------------------------------------

    def finalize(self, error: StreamError | None = None) -> AssistantMessage:
        """Close open blocks and settle stop reason, truncation flags and usage."""
        msg = self.message
        if error is not None:
            for o in self._open.values():
                if o.kind == _TOOL:
                    # A call still open when the stream failed never completed.
                    o.block.truncated = True  # type: ignore[union-attr]
        self.end_all()
        if error is not None:
            msg.stop_reason = "aborted" if error.kind == "aborted" else "error"
            msg.error = error
        else:
            self._settle_stop_reason()
        u = msg.usage
        if u.reasoning > u.output:
            # Some servers report more reasoning than output; it is a part of output.
            u.reasoning = u.output
        self._recount()
        return msg

    def _settle_stop_reason(self) -> None:
        msg = self.message
        raw = msg.raw_stop_reason
        rule: StopRule = "stop"
        if self._stop_rule is not None:
            rule = self._stop_rule
        elif raw is not None:
            found = self._stop_reasons.get(raw)
            if found is None:
                if (msg.api, raw) not in _warned_unknown:
                    _warned_unknown.add((msg.api, raw))
                    logger.warning("%s: unknown stop reason %r, treated as stop", msg.api, raw)
            else:
                rule = found
        calls = [b for b in msg.content if isinstance(b, ToolCall)]
        if rule == "length":
            for call in calls:
                call.truncated = True
            msg.stop_reason = "length"
        elif rule in ("refusal", "content_filter"):
            msg.stop_reason = "error"
            text = f"the model stopped: {raw}"
            if self._stop_detail:
                text += f" ({self._stop_detail})"
            msg.error = StreamError(kind=rule, message=text)
        elif calls:
            msg.stop_reason = "tool_use"
        else:
            msg.stop_reason = "stop"


def _finish_arguments(call: ToolCall) -> None:
    text = call.partial_json
    try:
        call.arguments = parse_arguments(text)
    except ArgumentsError:
        partial = parse_partial_json(text)
        call.arguments = partial if isinstance(partial, dict) else {}
        call.truncated = True
        return
    call.partial_json = ""


def compute_cost(model: Model, usage: Usage) -> Cost | None:
    """USD for `usage` at `model`'s prices; None when a needed price is unknown."""
    p = model.prices
    parts = []
    for tokens, price in (
        (usage.input, p.input),
        (usage.output, p.output),
        (usage.cache_read, p.cache_read),
        (usage.cache_write, p.cache_write),
    ):
        if price is None:
            if tokens:
                return None
            parts.append(0.0)
        else:
            parts.append(tokens * price / 1_000_000)
    if p.input is None or p.output is None:
        return None
    return Cost(
        input=parts[0],
        output=parts[1],
        cache_read=parts[2],
        cache_write=parts[3],
        total=sum(parts),
    )
