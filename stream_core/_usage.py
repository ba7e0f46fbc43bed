"""Usage, cost and errors: what a call consumed and how it failed. Part of the data model
(`_types` re-exports them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ._content import _Model

__all__ = ["Cost", "ErrorKind", "StopReason", "StreamError", "Usage"]


# --- usage and errors -------------------------------------------------------------------


_COST_FIELDS = ("input", "output", "cache_read", "cache_write", "server_tools", "total")
_USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning", "total_tokens")


class Cost(_Model):
    """USD, per component and in total.

    Costs add (`a + b`, and `sum(costs)`): field by field, a new object."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    server_tools: float = Field(default=0.0, exclude_if=lambda v: v == 0)
    """Vendor-run tool calls priced per call (web searches, ...): part of `total`."""
    total: float = 0.0

    def __add__(self, other: object) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(**{f: getattr(self, f) + getattr(other, f) for f in _COST_FIELDS})

    def __radd__(self, other: object) -> Cost:
        # `sum()` starts from 0.
        if other == 0 and not isinstance(other, bool):
            return self.model_copy()
        return NotImplemented


class Usage(_Model):
    """Token accounting (CONTRACT 3.4).

    `input` excludes cached reads and cache writes; `output` includes reasoning, and
    `reasoning` is the part of `output` spent thinking. `total_tokens` is always
    `input + output + cache_read + cache_write`. `cost` is None when the model's prices
    are unknown.

    Usages add (`a + b`, `sum(usages)`, or `total_usage(messages)` for a conversation): the
    counts are summed, and so are the costs when both sides have one. When either side's
    cost is None the sum's cost is None: an unknown price is not zero, so a total that
    includes a call nobody could price is unknown too, never an undercount.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    total_tokens: int = 0
    """`input + output + cache_read + cache_write`: computed when not given
    (`Usage(input=10, output=5).total_tokens == 15`)."""
    cost: Cost | None = None
    clamped: dict[str, int] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The vendor's own counts, by field, of those it reported beyond what the request
    could produce (output past its `max_tokens`, input past the model's context window):
    the counts above are then clamped to those bounds, and so is the cost a budget is
    charged. None when the vendor's usage was within them."""
    server_tools: dict[str, int] | None = Field(default=None, exclude_if=lambda v: v is None)
    """Calls of vendor-run tools the vendor counted, by portable kind where there is one
    (`web_search`, `web_fetch`, `code_execution`, ...), else by the vendor's own name; priced
    per call where the vendor publishes a price. None when the vendor reported none."""

    @model_validator(mode="after")
    def _fill_total(self) -> Usage:
        if not self.total_tokens:
            total = self.input + self.output + self.cache_read + self.cache_write
            if total:
                self.__dict__["total_tokens"] = total
        return self

    def __add__(self, other: object) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = None
        if self.cost is not None and other.cost is not None:
            cost = self.cost + other.cost
        counts = {f: getattr(self, f) + getattr(other, f) for f in _USAGE_FIELDS}
        tools = None
        if self.server_tools or other.server_tools:
            tools = dict(self.server_tools or {})
            for name, n in (other.server_tools or {}).items():
                tools[name] = tools.get(name, 0) + n
        return Usage(**counts, cost=cost, server_tools=tools)

    def __radd__(self, other: object) -> Usage:
        # `sum()` starts from 0.
        if other == 0 and not isinstance(other, bool):
            return self.model_copy(deep=True)
        return NotImplemented


StopReason = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why a message ended: `stop` (the model finished, or hit a stop sequence), `length` (the
output limit cut it), `tool_use` (it holds a tool call to answer), `error` (see
`AssistantMessage.error`) or `aborted` (the caller stopped it). The vendor's own word is in
`AssistantMessage.raw_stop_reason`."""
ErrorKind = Literal[
    "auth",
    "rate_limit",
    "overloaded",
    "context_overflow",
    "invalid_request",
    "not_found",
    "server",
    "network",
    "timeout",
    "refusal",
    "content_filter",
    "aborted",
    "protocol",
    "invalid_output",
    "budget",
    "expired",
]
"""What went wrong, as `StreamError.kind`: the same word for the same failure on every
vendor (`rate_limit`, `context_overflow`, `timeout`, ...), so a harness decides on it, not on
the vendor's text. `aborted` is the caller's own cancel; `protocol` a stream that broke its
format; `invalid_output` a structured answer that did not parse or match its schema;
`budget` a call that a spend budget (`configure_limits`) could not fit, ended before
anything was sent; `expired` a batch request the vendor did not run within the batch's
window (`stream_core.batch`: it can be submitted again)."""


class StreamError(_Model):
    """A failure, as data. Never carries a secret."""

    kind: ErrorKind
    message: str
    status_code: int | None = None
    retryable: bool = False
    retry_after: float | None = None
    """Seconds the vendor asked us to wait, if it said."""
