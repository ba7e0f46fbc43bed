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

import hashlib
import logging
import time
import typing
from collections import deque
from collections.abc import Hashable, KeysView, Mapping
from typing import Any, Literal

from .._blocks import ServerToolCall
from .._cost import CostContext, compute_cost
from .._decoding.json_values import (
    ArgumentsError,
    is_storable_json,
    parse_arguments,
    parse_partial_json,
)
from .._errors import RETRYABLE_KINDS, first_time, quote, redact
from .._events import (
    AssistantStreamEvent,
    BlockEnd,
    BlockStart,
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
from .._models import Model
from .._output import OutputSpec
from .._output import read_output as read_output_of
from .._types import (
    AssistantMessage,
    ErrorKind,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from .blocks import (
    _BLOCK,
    _TEXT,
    _THINKING,
    _TOOL,
    BlockMethods,
    _count,
    _declared_order,
    _finish_input,
    _need_str,
)

__all__ = ["Assembler", "StopRule", "compute_cost"]

logger = logging.getLogger("stream_core")

StopRule = Literal["stop", "length", "tool_use"] | ErrorKind
"""What a vendor stop value means: `stop`, `length` or `tool_use`, or an error kind
(`ErrorKind`): the message then ends `error` of that kind, its content kept, with a text
naming the vendor's value ("the model stopped: ERROR"). `refusal` / `content_filter` are
the model declining; `protocol` is the model writing something unusable (a malformed call);
any other kind is the vendor failing the call through its stop value (Cohere's `ERROR` ->
`server`, `TIMEOUT` -> `timeout`), `retryable` as for the same kind of HTTP error."""

STOP_RULES: frozenset[str] = frozenset(
    value for part in typing.get_args(StopRule) for value in typing.get_args(part)
)
"""Every value a stop-reason table may map to."""


def check_stop_rules(table: Mapping[str, str], where: str) -> None:
    """Raise `ValueError` naming the entries of a stop-reason table that are no `StopRule`
    (a typo would otherwise end every such message in a validation error)."""
    wrong = {raw: rule for raw, rule in table.items() if rule not in STOP_RULES}
    if wrong:
        raise ValueError(
            f"{where}: {wrong} maps to no StopRule (stop, length, tool_use or an error "
            f"kind: {', '.join(sorted(STOP_RULES - {'stop', 'length', 'tool_use'}))})"
        )


_new = object.__new__
_warned_unknown: set[tuple[str, ...]] = set()
"""(api, stop reason) pairs warned about: bounded in count and size (`first_time`)."""


class _Open:
    __slots__ = ("block", "generated", "index", "kind")

    def __init__(self, kind: int, index: int, block: Any):
        self.kind = kind
        self.index = index
        self.block = block
        self.generated = False
        """The tool call's id is ours (the vendor sent none, an empty one or a repeat)."""


class Assembler(BlockMethods):
    """Builds one message; events go to `out`, which the stream drains."""

    def __init__(
        self,
        message: AssistantMessage,
        model: Model,
        stop_reasons: Mapping[str, StopRule],
        out: deque[AssistantStreamEvent],
        pricing: CostContext | None = None,
        output: OutputSpec | None = None,
    ) -> None:
        self.message = message
        self.secrets: tuple[str, ...] = ()
        """The request's credentials (set by the stream): the vendor's short strings are
        redacted as they are stored, so no event shows an echoed key (CONTRACT 4)."""
        self.output = output
        """The structured answer asked for; in tool mode, calls to its tool are the text."""
        self._output_tool = output.name if output is not None and output.mode == "tool" else None
        self._output_keys: set[Hashable] = set()
        self.model = model
        self.pricing = pricing
        self.out = out
        if not STOP_RULES.issuperset(stop_reasons.values()):
            check_stop_rules(stop_reasons, f"{message.api} stop_reasons")
        self._stop_reasons = stop_reasons
        self._open: dict[Hashable, _Open] = {}
        self.open_keys: KeysView[Hashable] = self._open.keys()
        """The keys of the open blocks, live and read-only: `key in asm.open_keys` is
        `is_open(key)` without a call, for a translator's hottest path."""
        self._stop_detail: str | None = None
        self._stop_rule: StopRule | None = None
        self._call_ids: set[str] = set()
        self._generated_ids: set[str] = set()
        """Tool-call ids made here (the vendor sent none, an empty one or a repeat), for
        `stream-core record`, whose fixtures list only the ids the vendor sent."""
        self.finished = False
        """The vendor's terminal event arrived."""
        self.complete_at_eof = False
        """The vendor's stop arrived and only trailing data may follow (Bedrock's usage
        `metadata` after `messageStop`): the body ending now is a normal end, not `network`."""
        self.updated = False
        """At least one `message_update` was emitted (no retry after that)."""
        self.first_update: float | None = None
        """`time.perf_counter()` at the first `message_update` (taken once, per block start)."""

    # --- blocks -------------------------------------------------------------------------

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def block(self, key: Hashable) -> Any:
        """The open block under `key` (None: none is open)."""
        o = self._open.get(key)
        return o.block if o is not None else None

    def _start(self, key: Hashable, kind: int, block: Any) -> _Open:
        if key in self._open:
            self.end(key)
        content = self.message.content
        o = _Open(kind, len(content), block)
        content.append(block)
        self._open[key] = o
        if kind == _BLOCK:
            delta: Any = BlockStart(o.index, block.type)
        else:
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
        if delta.__class__ is not str:
            _need_str(delta, "a text delta")
        o = self._open.get(key)
        if o is None or o.kind != _TEXT:
            o = self._start(key, _TEXT, TextContent())
        d = o.block.__dict__
        text = d.pop("text")
        text += delta
        d["text"] = text
        # The two events built field by field, as their `__init__`s would: this runs once
        # per vendor delta, and two Python-level `__init__` calls cost a third of it.
        ev = _new(TextDelta)
        ev.content_index, ev.delta, ev.type = o.index, delta, "text_delta"
        up = _new(MessageUpdate)
        up.message, up.delta, up.type = self.message, ev, "message_update"
        self.out.append(up)

    def start_thinking(
        self, key: Hashable, *, signature: str | None = None, redacted: bool = False
    ) -> None:
        if signature is not None:
            _need_str(signature, "a thinking signature")
        self._start(key, _THINKING, ThinkingContent(signature=signature, redacted=redacted))

    def thinking(self, key: Hashable, delta: str, *, signature: str | None = None) -> None:
        if not delta:
            return
        if delta.__class__ is not str:
            _need_str(delta, "a thinking delta")
        if signature is not None:
            _need_str(signature, "a thinking signature")
        o = self._open.get(key)
        if o is None or o.kind != _THINKING:
            o = self._start(key, _THINKING, ThinkingContent(signature=signature))
        d = o.block.__dict__
        text = d.pop("thinking")
        text += delta
        d["thinking"] = text
        ev = _new(ThinkingDelta)  # built as in `text`
        ev.content_index, ev.delta, ev.type = o.index, delta, "thinking_delta"
        up = _new(MessageUpdate)
        up.message, up.delta, up.type = self.message, ev, "message_update"
        self.out.append(up)

    def thinking_signature(self, key: Hashable, fragment: str) -> None:
        """Append to the signature of an open thinking block (no event: it is not text)."""
        _need_str(fragment, "a signature fragment")
        o = self._open.get(key)
        if o is not None and isinstance(o.block, ThinkingContent):
            o.block.signature = (o.block.signature or "") + fragment

    def start_tool_call(self, key: Hashable, *, id: str, name: str) -> None:
        self._start_call(key, id, name)

    def _start_call(self, key: Hashable, id: str, name: str) -> _Open:
        _need_str(id, "a tool call id")
        _need_str(name, "a tool call name")
        if name and name == self._output_tool:
            # Structured output by a forced tool: its arguments are the answer, streamed as
            # text, so the history holds a plain answer and no call awaiting a result.
            self._output_keys.add(key)
            return self._start(key, _TEXT, TextContent())
        o = self._start(key, _TOOL, ToolCall(name=name))
        self._assign_id(o, id)
        return o

    def _assign_id(self, o: _Open, id: str) -> None:
        """Ids are non-empty and unique within the message (CONTRACT 2): a missing, empty or
        repeated vendor id gets one made from the response and the call's position."""
        call = o.block
        assert isinstance(call, ToolCall)
        if id and id not in self._call_ids:
            call.id = id
            o.generated = False
        else:
            # The same bytes give the same ids (replays compare equal); the response id,
            # when the vendor sends one, keeps them apart across a conversation.
            seed = self.message.response_id
            new = f"call_{o.index}"
            if seed:
                digest = hashlib.blake2s(seed.encode(), digest_size=6).hexdigest()
                new = f"call_{digest}_{o.index}"
            while new in self._call_ids:
                new += "_"
            call.id = new
            o.generated = True
            self._generated_ids.add(new)
        self._call_ids.add(call.id)

    def set_call_id(self, key: Hashable, id: str) -> None:
        """The vendor's final id for the tool call open under `key` (a vendor that revises
        it before the call ends); kept unique in the message like any call id."""
        o = self._open.get(key)
        if o is None or o.kind != _TOOL or not id or id == o.block.id:
            return
        _need_str(id, "a tool call id")
        self._call_ids.discard(o.block.id)
        self._generated_ids.discard(o.block.id)
        self._assign_id(o, id)

    def tool_call(
        self, key: Hashable, fragment: str, *, id: str | None = None, name: str | None = None
    ) -> None:
        """Append an argument fragment to the call under `key`, starting one if needed.

        A different vendor id under a key that is open means a new call (servers that
        reuse index 0 for every parallel call): the open one is ended first. An id that
        arrives after the call started replaces the one we made up. Empty fragments start
        a call but emit no delta (deltas are never empty).
        """
        o = self._open.get(key)
        if o is not None and o.kind == _TOOL and not id and not name:
            # The common fragment: a call already open, nothing but arguments.
            if not fragment:
                return
            if fragment.__class__ is not str:
                _need_str(fragment, "a tool argument fragment")
            d = o.block.__dict__
            buf = d.pop("partial_json")
            buf += fragment
            d["partial_json"] = buf
            ev = _new(ToolCallDelta)  # built as in `text`
            ev.content_index, ev.delta, ev.type = o.index, fragment, "toolcall_delta"
            up = _new(MessageUpdate)
            up.message, up.delta, up.type = self.message, ev, "message_update"
            self.out.append(up)
            return
        if key in self._output_keys:
            if key in self._open:
                self.text(key, fragment)
                return
            self._output_keys.discard(key)  # the key was ended: a new block
        o = self._open.get(key)
        if o is not None and o.kind == _TOOL and id:
            call = o.block
            assert isinstance(call, ToolCall)
            if id != call.id:
                if not o.generated:
                    o = None
                elif id not in self._call_ids:
                    self._call_ids.discard(call.id)
                    self._generated_ids.discard(call.id)
                    call.id = id
                    o.generated = False
                    self._call_ids.add(id)
        if o is None or o.kind != _TOOL:
            o = self._start_call(key, id or "", name or "")
            if o.kind == _TEXT:
                self.text(key, fragment)
                return
        elif name:
            _need_str(name, "a tool call name")
            call = o.block
            if call.name != name:
                call.name = name
        if not fragment:
            return
        if fragment.__class__ is not str:
            _need_str(fragment, "a tool argument fragment")
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
        if o.kind == _BLOCK:
            if isinstance(o.block, ServerToolCall) and o.block.partial_json:
                _finish_input(o.block)
            self.out.append(MessageUpdate(self.message, BlockEnd(o.index)))
            return
        if o.kind == _TEXT:
            _declared_order(o.block)
            delta: TextEnd | ThinkingEnd | ToolCallEnd = TextEnd(o.index)
        elif o.kind == _THINKING:
            _declared_order(o.block)
            delta = ThinkingEnd(o.index)
        else:
            _finish_arguments(o.block)
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
            self.message.response_model = redact(value, self.secrets)

    def set_stop_reason(
        self, raw: str | None, *, detail: str | None = None, rule: StopRule | None = None
    ) -> None:
        """Record the vendor's stop value (kept verbatim); `rule` overrides the table when
        the vendor says more elsewhere (e.g. a refusal field next to `stop`)."""
        if raw is not None:
            _need_str(raw, "the stop reason")
            self.message.raw_stop_reason = redact(raw, self.secrets)
        if detail:
            _need_str(detail, "the stop detail")
            self._stop_detail = detail
        if rule is not None:
            if rule not in STOP_RULES:
                check_stop_rules({str(raw): rule}, "set_stop_reason(rule=...)")
            self._stop_rule = rule

    def set_response_id(self, value: str | None) -> None:
        """The vendor's id for this response (first one wins; None is ignored)."""
        if value is None or self.message.response_id is not None:
            return
        _need_str(value, "the response id")
        self.message.response_id = redact(value, self.secrets)

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
            u.input = _count(input, "usage input")
        if output is not None:
            u.output = _count(output, "usage output")
        if cache_read is not None:
            u.cache_read = _count(cache_read, "usage cache_read")
        if cache_write is not None:
            u.cache_write = _count(cache_write, "usage cache_write")
        if reasoning is not None:
            u.reasoning = _count(reasoning, "usage reasoning")
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
        u.input += _count(input, "usage input")
        u.output += _count(output, "usage output")
        u.cache_read += _count(cache_read, "usage cache_read")
        u.cache_write += _count(cache_write, "usage cache_write")
        u.reasoning += _count(reasoning, "usage reasoning")
        self._recount()

    def _recount(self) -> None:
        u = self.message.usage
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write
        u.cost = compute_cost(self.model, u, self.pricing)  # total: None when it cannot be

    # --- the end ------------------------------------------------------------------------

    def finalize(
        self, error: StreamError | None = None, *, read_output: bool = True
    ) -> AssistantMessage:
        """Close open blocks and settle stop reason, truncation flags and usage; with
        `read_output=False` the structured answer is left for the caller to read (off the
        event loop: `output_text`, then `set_output`)."""
        msg = self.message
        if error is not None:
            for o in self._open.values():
                if o.kind == _TOOL:
                    # A call still open when the stream failed never completed.
                    o.block.truncated = True
        self.end_all()
        if error is not None:
            msg.stop_reason = "aborted" if error.kind == "aborted" else "error"
            msg.error = error
        else:
            _settle_stop_reason(msg, self._stop_rule, self._stop_reasons, self._stop_detail)
        if self.output is not None:
            msg.output_mode = self.output.mode
            if read_output:
                text = self.output_text()
                if text is not None:
                    self.set_output(*read_output_of(text, self.output))
        u = msg.usage
        if u.reasoning > u.output:
            # Some servers report more reasoning than output; it is a part of output.
            u.reasoning = u.output
        self._recount()
        return msg

    def output_text(self) -> str | None:
        """The text to read the structured answer from: only of a message that stopped
        normally (a `length` stop is never a parsed partial object), else None."""
        if self.output is None or self.message.stop_reason != "stop":
            return None
        return self.message.text()

    def set_output(self, value: Any, problem: str | None) -> None:
        """Store what `read_output` found: the answer, or the message ends `invalid_output`
        with its text kept."""
        msg = self.message
        if problem is None:
            msg.output = value
        else:
            msg.stop_reason = "error"
            msg.error = StreamError(kind="invalid_output", message=problem)


def _settle_stop_reason(
    msg: AssistantMessage,
    forced: StopRule | None,
    table: Mapping[str, StopRule],
    detail: str | None,
) -> None:
    """The message's stop reason from the vendor's raw one (or a rule the translator set):
    `tool_use` whenever a call is held, `length` truncating every call, any other rule an
    error of that kind."""
    raw = msg.raw_stop_reason
    rule: StopRule = "stop"
    if forced is not None:
        rule = forced
    elif raw is not None:
        found = table.get(raw)
        if found is None:
            if first_time(_warned_unknown, msg.api, raw):
                logger.warning("%s: unknown stop reason %s, treated as stop", msg.api, quote(raw))
        else:
            rule = found
    calls = [b for b in msg.content if isinstance(b, ToolCall)]
    if rule == "length":
        for call in calls:
            call.truncated = True
        msg.stop_reason = "length"
    elif rule == "stop" or rule == "tool_use":
        # `tool_use` whenever a call is held, whatever the vendor said (CONTRACT 3.3).
        msg.stop_reason = "tool_use" if calls else "stop"
    else:
        # Any other rule is an error kind: the vendor's stop value says the call failed.
        msg.stop_reason = "aborted" if rule == "aborted" else "error"
        text = f"the model stopped: {raw}"
        if detail:
            text += f" ({detail})"
        msg.error = StreamError(kind=rule, message=text, retryable=rule in RETRYABLE_KINDS)


def _finish_arguments(call: ToolCall) -> None:
    """Parse the arguments once, at the end. Text that is not one storable JSON object
    (invalid, cut, nested too deep for a message to round-trip, a number beyond a float)
    marks the call truncated, with what parses of it; this never raises."""
    text = call.partial_json
    try:
        arguments: dict[str, Any] | None = parse_arguments(text)
    except (ArgumentsError, RecursionError, MemoryError):
        arguments = None
    if arguments is not None and is_storable_json(arguments):
        call.arguments = arguments
        call.partial_json = ""
        return
    try:
        partial = parse_partial_json(text)
    except (ValueError, RecursionError, MemoryError):
        partial = None
    call.arguments = partial if isinstance(partial, dict) and is_storable_json(partial) else {}
    call.truncated = True
