"""The end of a call: one `message_end`, whatever way the call ends.

`Finishing._finish` is the one place a stream ends: the watcher stopped, the body handed
to a drain or closed, every kept vendor string and the error redacted, the message
finalized (the structured answer read off the event loop), timing and the span recorded.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import time
import traceback
from typing import Any

import anyio

from .._cost import CostContext, compute_cost
from .._errors import first_time, quote, redact
from .._events import MessageEnd, MessageStart
from .._models import Model
from .._options import StreamOptions
from .._output import read_output
from .._transport import drain_later
from .._types import AssistantMessage, ServerToolCall, ServerToolResult, StreamError
from .state import _DONE, _START, CallState

__all__ = ["Finishing", "clamp_usage"]

logger = logging.getLogger("stream_core")

_SETTLE_TURNS = 16
"""Event-loop turns a finished call gives its drain task (see `Finishing._finish`)."""

_INLINE_OUTPUT = 64 * 1024
"""A JSON-Schema answer up to this many characters is read on the loop (microseconds);
a longer one, or any answer validated by a class, in a worker thread."""


_THINKING_OUTPUT = 2048
"""The output limit a thinking call may be raised to past its `max_tokens` (Anthropic's and
Bedrock's 1,024-token minimum budget plus 1,024 for the answer)."""

_SERVER_ROUNDS = 10
"""Sampling rounds one answer may hold (Anthropic's server-side tool loop stops for a
`pause_turn` after 10): its input may reach this many times the prompt."""

_warned_clamps: set[tuple[str, ...]] = set()


def _count_text(count: int) -> str:
    """A count for a log line: a vendor's may run to hundreds of digits."""
    return f"{count:,}" if count < 10**18 else f"a {len(str(count))}-digit number"


_otel_module: Any = None


def _otel() -> Any:
    """`stream_core._otel` when OpenTelemetry is installed, else None (looked up once;
    nothing is imported without it)."""
    global _otel_module
    if _otel_module is None:
        _otel_module = False
        if importlib.util.find_spec("opentelemetry") is not None:
            try:
                from .. import _otel as module
            except ImportError:
                pass
            else:
                _otel_module = module
    return _otel_module or None


class Finishing(CallState):
    """The end stage of `AssistantStream`."""

    __slots__ = ()

    async def _orphaned(self) -> None:
        """Iterated in a child after `fork()`: the response, its socket and the watcher
        belong to the parent's event loop; they are dropped, never touched (a read would
        wait forever, a close could end the parent's stream)."""
        self._response = self._chunks = None
        self._socket = None
        self._stop_watch = None
        self._client = None
        await self._finish(
            StreamError(
                kind="invalid_request",
                message="this stream was opened before fork(), in another process; a stream "
                "cannot cross a fork: open a new one in this process",
            )
        )

    async def _read_output(self) -> None:
        """The structured answer, read in a worker thread (CPU work, and the caller's class
        may run validators of its own): no event loop, nor the sync facade's shared one,
        waits on it, and `total_timeout` still ends the call, its text kept."""
        asm = self._asm
        text = asm.output_text()
        if text is None or self._output is None:
            return
        spec = self._output
        if len(text) <= _INLINE_OUTPUT and spec.model_class is None:
            asm.set_output(*read_output(text, spec))
            return
        limit = math.inf if self._deadline is None else self._deadline - anyio.current_time()
        found: tuple[Any, str | None] | None = None
        with anyio.move_on_after(max(limit, 0)):
            # Abandoned at the deadline: the thread finishes alone and its answer is dropped.
            found = await anyio.to_thread.run_sync(read_output, text, spec, abandon_on_cancel=True)
        if found is None:
            self.message.stop_reason = "error"
            self.message.error = self._total_timeout_error()
        else:
            asm.set_output(*found)

    async def _finish(self, error: StreamError | None) -> None:
        if self._state == _DONE:
            return
        if self._state == _START:
            # Closed before the first read: the sequence still opens with message_start.
            self._queue.append(MessageStart(self.message))
        self._state = _DONE
        if self._stop_watch is not None:
            self._stop_watch()
            self._stop_watch = None
        drained = None
        if error is None and self._socket is not None and self._response is not None:
            # The rest of the body is read in a task of its own, so the connection can go
            # back to the pool without this call waiting for a slow or endless tail.
            drained = drain_later(self._response, self._chunks)
            if drained is not None:
                self._response = self._chunks = None
                self._socket = None
        await self._close_response()
        # The shared client stays open for the next call on this event loop.
        self._client = None
        m = self.message
        if self._secrets:
            # One place for every error text, vendor words included (an error event or a
            # quoted malformed line may echo the key), and for the vendor's short strings.
            # Content is the model's output and is left as sent (see README, "Secrets").
            if error is not None:
                error.message = redact(error.message, self._secrets)
            # Every vendor string we keep; the assembler redacts them as they are stored
            # too, so no event before this one shows an echoed key (this catches a plugin
            # that sets them on the message itself).
            for name in ("raw_stop_reason", "response_id", "response_model", "request_id"):
                value = getattr(m, name)
                if isinstance(value, str):
                    setattr(m, name, redact(value, self._secrets))
        try:
            self._asm.finalize(error, read_output=False)
            await self._read_output()
        except Exception as exc:  # a bug: the message still ends, as an error, never a raise
            logger.debug("finalize failed: %s", redact(traceback.format_exc(), self._secrets))
            m.stop_reason = "error"
            m.error = StreamError(
                kind="protocol", message=redact(f"{type(exc).__name__}: {exc}", self._secrets)
            )
        if m.stop_reason == "length" and not m.usage.output and not m.content and not m.error:
            self._silent_overflow()
        self._clamp_usage()
        if self._ticket is not None:
            await self._settle(m.error)
        if self._started is not None:
            self._record_timing()
        on_end = self._on_end
        if on_end is not None:
            on_end(m)
        self._queue.append(MessageEnd(m))
        if drained is not None:
            # A tail already received (the usual chunked end) is read within a few turns
            # of the event loop: let it, so a next call made at once finds the connection
            # in the pool. Never a wait on the server, and never a cancellation point.
            for _ in range(_SETTLE_TURNS):
                if drained.is_set():
                    break
                await anyio.lowlevel.cancel_shielded_checkpoint()

    def _silent_overflow(self) -> None:
        """A stream that ended `length` with no output because its input did not fit (some
        servers say nothing else): `context_overflow`, like the vendors' explicit errors,
        when its usage reports more input than the window or the catalog's window cannot
        hold the request's estimate."""
        m, window = self.message, self._model.context_window
        u = m.usage
        used = u.input + u.cache_read + u.cache_write
        if used <= window:
            from .._history.tokens import estimate_context_tokens  # a rare path: only here

            used = estimate_context_tokens(self._context)
            if used <= window:
                return
        m.stop_reason = "error"
        m.error = StreamError(
            kind="context_overflow",
            message=f"{self._model.id} stopped at its length limit with no output: the "
            f"request (about {used:,} input tokens) does not fit its context window of "
            f"{window:,} tokens",
        )

    def _clamp_usage(self) -> None:
        request = self._request
        size: int | None = None
        if request is not None:
            try:
                size = len(request.content)
            except Exception:  # noqa: BLE001 - a streamed body has no length: the window
                size = None
        clamp_usage(
            self.message, self._model, self._options, self._pricing, size, self._server_tools
        )

    def _record_timing(self) -> None:
        m, started, first = self.message, self._started, self._asm.first_update
        assert started is not None
        m.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        if first is not None:
            m.ttft_ms = round((first - started) * 1000, 3)
        span, self._span = self._span, None
        if span is not None:
            span.end(m, first)


def clamp_usage(
    message: AssistantMessage,
    model: Model,
    opts: StreamOptions,
    pricing: CostContext | None,
    request_size: int | None,
    server_tools: bool,
) -> None:
    """Hold the usage to what the request could produce, before a budget or a limit is
    charged with it: output to the output limit sent (`max_tokens`, else the model's;
    with thinking, at least the 2,048 a thinking call may be raised to) and the prompt
    (input, cache reads and writes) to the context window, or the request's size in
    bytes if larger (no token is shorter than a byte); when the request asks for a
    vendor-run tool (web search, code execution), or the answer shows the vendor ran one
    (a server tool block, a server-tool count), for each of `_SERVER_ROUNDS` rounds:
    such a tool samples again within one answer, re-reading the prompt, and the vendor
    sums the rounds' input. The vendor's own counts are kept on `usage.clamped`; one
    answer claiming 10**20 tokens cannot spend a budget. A stream's end and a batch's
    result (`whole`) both call it."""
    u = message.usage
    out_cap = opts.max_tokens or model.max_tokens
    prompt_cap = model.context_window
    if not isinstance(out_cap, int) or not isinstance(prompt_cap, int):
        return  # a model changed without validation: nothing to bound by
    if opts.thinking_budget() is not None:
        out_cap = max(out_cap, _THINKING_OUTPUT)
    if request_size is not None:
        prompt_cap = max(prompt_cap, request_size)
    if server_tools or _ran_server_tools(message):
        prompt_cap *= _SERVER_ROUNDS
    clamped: dict[str, int] = {}
    if out_cap > 0 and u.output > out_cap:
        clamped["output"] = u.output
        u.output = out_cap
        u.reasoning = min(u.reasoning, out_cap)
    if prompt_cap > 0 and u.input + u.cache_read + u.cache_write > prompt_cap:
        left = prompt_cap
        # The dearest first, so a clamp never prices the prompt below the bound's cost.
        for name in ("cache_write", "input", "cache_read"):
            value = getattr(u, name)
            if value > left:
                clamped[name] = value
                setattr(u, name, left)
            left -= min(value, left)
    if not clamped:
        return
    u.clamped = clamped
    u.total_tokens = u.input + u.output + u.cache_read + u.cache_write
    u.cost = compute_cost(model, u, pricing)
    if first_time(_warned_clamps, model.provider, model.id):
        logger.warning(
            "%s/%s reported usage beyond what the request could produce (%s); clamped "
            "to the request's bounds (usage.clamped keeps the vendor's counts)",
            quote(model.provider),
            quote(model.id),
            ", ".join(f"{k}={_count_text(v)}" for k, v in clamped.items()),
        )


def _ran_server_tools(message: AssistantMessage) -> bool:
    """The answer shows a vendor-run tool: a count of one, or a server call or result (a
    tool asked for through `on_payload`, a native form, or a recording without its request)."""
    if message.usage.server_tools:
        return True
    return any(isinstance(b, (ServerToolCall, ServerToolResult)) for b in message.content)
