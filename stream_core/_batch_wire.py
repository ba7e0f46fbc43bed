"""What a vendor's batch API supplies: `BatchWire`, and the shapes it speaks in.

A batch codec (`providers/_<vendor>_batch.py`) is tables and small functions, like a
provider module: how one planned request becomes one input line, how a part (one vendor
batch) is submitted, how its status and result lines read, how it is cancelled and listed.
It never opens a connection of its own: every HTTP exchange goes through the
`BatchSession` it is handed (credentials, signing, redaction, errors as kinds), and every
step that creates something the vendor bills or keeps (an uploaded file, an object, the
batch itself) is journaled through `session.record` before the next, so a process killed
at any point can find what it made (`stream_core.batch`).

The same module's tables are read by the fake vendor (`stream_core.testing`), which answers
the batch and file endpoints offline: status words, result-line shapes, error words.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx

from ._models import Model
from ._types import AssistantMessage
from ._usage import ErrorKind
from ._wire import WireRequest

__all__ = [
    "BATCH_CODECS",
    "BatchCounts",
    "BatchHTTPError",
    "BatchPart",
    "BatchSession",
    "BatchSettings",
    "BatchState",
    "BatchStatus",
    "BatchWire",
    "Outcome",
    "RawResult",
    "batch_wire",
]

BatchState = Literal["submitted", "running", "ending", "ended", "failed", "cancelling"]
"""Where a vendor batch is, in our words: `submitted` (accepted, being validated or
queued), `running`, `ending` (the vendor is writing results), `ended` (results are final:
completed, cancelled or expired alike), `failed` (the whole batch was refused after it was
accepted: validation; no result lines), `cancelling`."""

Outcome = Literal["succeeded", "errored", "expired", "cancelled"]
"""What became of one request."""


@dataclass(frozen=True)
class BatchCounts:
    """Requests of one vendor batch by outcome, as the vendor counts them."""

    total: int = 0
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    cancelled: int = 0

    @property
    def pending(self) -> int:
        return max(self.total - self.succeeded - self.errored - self.expired - self.cancelled, 0)


@dataclass(frozen=True)
class BatchStatus:
    """One vendor batch as the vendor describes it."""

    id: str
    state: BatchState
    vendor_state: str
    """The vendor's own word (`in_progress`, `JOB_STATE_RUNNING`, `InProgress`, ...)."""
    counts: BatchCounts = BatchCounts()
    created_at: float | None = None
    """Unix time."""
    expires_at: float | None = None
    tag: str | None = None
    """Our tag, where the vendor keeps a name or metadata (`BatchPart.tag`)."""
    where: Mapping[str, Any] = field(default_factory=dict)
    """Where its results are, in the codec's own words (file ids, URLs, S3 or GCS URIs)."""
    error: str | None = None
    """Why the batch failed, when it did (the vendor's words, clipped)."""
    model: str | None = None


@dataclass(frozen=True)
class RawResult:
    """One result line, read: the request's vendor-side id, its outcome and either the
    vendor's whole answer (`body`, parsed JSON, read by the provider's `parse_response`) or
    the error's kind and text."""

    custom_id: str
    outcome: Outcome
    body: Any = None
    kind: ErrorKind | None = None
    message: str = ""
    status: int | None = None


class BatchHTTPError(Exception):
    """A batch endpoint answered with an error status (or could not be reached): its
    kind (`rate_limit` for a queue that is full, `not_found` for a batch that is gone),
    the status (None: no answer) and the vendor's words, redacted. `retry_after` is the
    vendor's `Retry-After` in seconds, when it sent one."""

    def __init__(
        self, kind: ErrorKind, status: int | None, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class BatchSettings:
    """What a batch needs beyond the model's endpoint and key (all optional; each codec
    says which it reads and raises at submission, naming the field, when one it needs is
    missing).

    `storage_url`: the object store's base URL for APIs whose input and output are objects
    (Bedrock: S3, default `https://s3.<region>.amazonaws.com`; Vertex AI: Cloud Storage,
    default `https://storage.googleapis.com`). `bucket` and `prefix`: where input and
    output objects go. `role_arn`: the IAM role Bedrock runs the job as. `window_hours`:
    the completion window asked for where the vendor takes one (OpenAI `24h`, Bedrock
    `timeoutDurationInHours`). `control_url`: the vendor's control-plane base URL where it
    is not the model's (Bedrock's `bedrock.<region>` beside `bedrock-runtime.<region>`)."""

    storage_url: str | None = None
    bucket: str | None = None
    prefix: str = "stream-core-batches"
    role_arn: str | None = None
    window_hours: int | None = None
    control_url: str | None = None
    delete_files: bool = True
    """Delete the input and result files a part uploaded once it is collected."""
    queue_wait: float = 0.0
    """Seconds a submission may wait for the vendor's batch queue (a create refused as
    full, a pause learned from such a refusal by any process sharing the limit store)
    before it raises `BatchHTTPError` kind `rate_limit`."""
    queue_pause: float = 60.0
    """Seconds a queue refusal that names no time (OpenAI's `token_limit_exceeded`, found
    after the create was accepted) pauses new batches to that vendor and key base URL, for
    every process sharing the limit store. A refusal with a `Retry-After` uses it instead."""

    def __post_init__(self) -> None:
        for name in ("queue_wait", "queue_pause"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not 0 <= value < math.inf:
                raise ValueError(f"BatchSettings.{name}: {value!r} is not a number of seconds")


@dataclass(frozen=True)
class BatchPart:
    """What a codec submits as one vendor batch: `lines` made by its `line` function (one
    per request, `custom_id`s unique within the part), the requests' merged API headers
    (`anthropic-beta`, ...) and our `tag` (unique; the codec puts it where the vendor keeps
    a name or metadata, so `find` can tell this part's batch after a crash)."""

    tag: str
    model: Model
    lines: list[dict[str, Any]]
    headers: Mapping[str, str] = field(default_factory=dict)
    endpoint: str = ""
    """The planned requests' URL (its path picks OpenAI's `/v1/chat/completions` or
    `/v1/responses`, Gemini's model)."""


class BatchSession(Protocol):
    """What the engine hands a codec: sending, journaling, settings."""

    @property
    def model(self) -> Model: ...

    @property
    def settings(self) -> BatchSettings: ...

    @property
    def recorded(self) -> Mapping[str, Any]:
        """What earlier steps of this part recorded (this process's or a killed one's)."""
        ...

    async def send(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        files: Mapping[str, Any] | None = None,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        signer: Callable[[httpx.Request], tuple[str, ...]] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        """Send with the model's credentials (its API key header, bearer token or AWS
        signature; `signer` signs instead, e.g. for S3). A status outside `ok` raises
        `BatchHTTPError` with the error's kind, redacted; the body is read whole."""
        ...

    def record(self, **fields: Any) -> None:
        """Journal what a step made (a file id, an object key) before the next step; it is
        in `recorded` from then on, in this process and after a restart."""
        ...

    def url(self, path: str) -> str:
        """The model's base URL joined with `path` (`/messages/batches`)."""
        ...


@dataclass(frozen=True)
class BatchWire:
    """A vendor batch API (see the module docstring)."""

    name: str
    """`anthropic-message-batches`, `openai-batch`, ..."""
    line: Callable[[str, WireRequest, Model], dict[str, Any]]
    """(custom id, the planned request, the model) -> one input line; streaming fields
    removed, everything else as `stream()` sends it."""
    submit: Callable[[BatchSession, BatchPart], Awaitable[str]]
    """Upload (recording each file or object made) and create the batch; returns the
    vendor's batch id."""
    status: Callable[[BatchSession, str], Awaitable[BatchStatus]]
    results: Callable[[BatchSession, BatchStatus], AsyncIterator[RawResult]]
    """Every result line of an ended batch (for some vendors also as they become
    available), read as they arrive."""
    cancel: Callable[[BatchSession, str], Awaitable[None]]
    listing: Callable[[BatchSession], AsyncIterator[BatchStatus]]
    """The account's batches, newest first."""
    find: Callable[[BatchSession, BatchPart, float], Awaitable[list[str]]]
    """After a crash between asking for a batch and recording its id: the ids of batches
    that may be this part's (its tag where the vendor keeps one; created since the Unix
    time given, with the part's request count, where it keeps none)."""
    cleanup: Callable[[BatchSession, BatchStatus | None], Awaitable[None]] | None = None
    """Delete the files or objects the part made (`session.recorded`) and the vendor's
    result files, once collected; never raises for one already gone."""
    refused: Callable[[BatchStatus], bool] | None = None
    """Whether a `failed` batch was refused by the vendor's queue after it accepted the
    create (OpenAI's enqueued-token limit): none of its requests ran and nothing was
    billed, so the engine submits the part again once the learned pause is over."""
    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    min_requests: int = 1
    one_model: bool = True
    """Every request of one vendor batch must name the same model."""
    window_hours: float = 24.0
    """How long the vendor may take before unfinished requests expire."""
    custom_id_pattern: str = r"^[A-Za-z0-9_-]{1,64}$"
    answer_body: Callable[[AssistantMessage, Model], dict[str, Any]] | None = None
    """The vendor's whole answer for a message, as a result line carries it: the inverse of
    the provider's `parse_response` (the fake vendor writes results with it; the round-trip
    tests hold the two together)."""


BATCH_CODECS: dict[tuple[str, str], str] = {
    ("anthropic-messages", "anthropic"): "_anthropic_batch",
    ("openai-completions", "openai"): "_openai_batch",
    ("openai-responses", "openai"): "_openai_batch",
    ("google-generative-ai", "google"): "_gemini_batch",
    ("google-generative-ai", "google-vertex"): "_vertex_batch",
    ("mistral-conversations", "mistral"): "_mistral_batch",
    ("bedrock-converse-stream", "amazon-bedrock"): "_bedrock_batch",
}
"""(wire API, provider) -> the module of `providers/` holding its batch codec (`BATCH`)."""


def batch_wire(model: Model) -> BatchWire:
    """The batch codec for `model`'s API and provider; `ValueError` naming the ones there
    are when it has none."""
    name = BATCH_CODECS.get((model.api, model.provider))
    if name is None:
        known = ", ".join(f"{p} ({a})" for a, p in sorted(BATCH_CODECS))
        raise ValueError(
            f"model: {model.provider}/{model.id} ({model.api}) has no batch API here; "
            f"batches go to {known}"
        )
    module = importlib.import_module(f"stream_core.providers.{name}")
    wire: BatchWire = module.BATCH
    return wire
