"""What a caller hands a batch and gets back: requests, results, progress."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stream_core import AssistantMessage, Context, Model, StreamOptions
from stream_core.provider import BatchCounts, Outcome

__all__ = ["BatchRequest", "BatchResult", "JobProgress"]


@dataclass(frozen=True)
class BatchRequest:
    """One request of a batch: the same `(model, context, options)` as `stream()`, and the
    caller's `custom_id` (any non-empty string up to 512 characters, unique in the job),
    which keys its result, the resume set and the journal."""

    custom_id: str
    model: Model
    context: Context | dict[str, Any]
    options: StreamOptions | None = None


@dataclass(frozen=True)
class BatchResult:
    """One request's result: `message` is the `AssistantMessage` a stream of that answer
    gives (content, tool calls, usage, stop reason, `output`), its cost at the batch price;
    a request the vendor errored, expired or cancelled is a message too, with
    `stop_reason="error"` and `error.kind` (`expired`: resubmit it; `aborted`: cancelled).
    `batch_id` is the vendor's batch it ran in."""

    custom_id: str
    outcome: Outcome
    message: AssistantMessage
    batch_id: str


@dataclass(frozen=True)
class JobProgress:
    """Where a job is: its requests by outcome (as the vendors count them, and as
    collected here), and its state: `submitting` (some part not yet accepted), `running`,
    `ended` (every part's results are final) or `collected` (and every result is written)."""

    state: str
    total: int
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    cancelled: int = 0
    collected: int = 0
    failed_parts: int = 0

    @property
    def pending(self) -> int:
        done = self.succeeded + self.errored + self.expired + self.cancelled
        return max(self.total - done, 0)

    @classmethod
    def of(cls, state: str, total: int, counts: list[BatchCounts], collected: int) -> JobProgress:
        return cls(
            state=state,
            total=total,
            succeeded=sum(c.succeeded for c in counts),
            errored=sum(c.errored for c in counts),
            expired=sum(c.expired for c in counts),
            cancelled=sum(c.cancelled for c in counts),
            collected=collected,
        )
