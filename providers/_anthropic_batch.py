"""Anthropic Message Batches (`POST /v1/messages/batches`): the batch codec.

A line is `{"custom_id", "params"}`, `params` being the Messages request `stream()` sends
without `stream`; every request of a batch may name its own model. The create call carries
the requests' API headers (`anthropic-version`, and `anthropic-beta` with the betas they
ask, but the streaming-only ones, `STREAMING_BETAS`). The batch is polled at
`/v1/messages/batches/{id}` (`processing_status`, `request_counts`), and once it ended its
results are one JSONL line per request: `{"custom_id", "result": {"type": "succeeded",
"message": <Message>}}`, or `errored` with the error body, `canceled`, `expired`.

Anthropic keeps no name or metadata on a batch: after a crash between asking for a batch
and recording its id, `find` names the batches created since then with the part's request
count, less those that ended with other custom ids in their results (an unfinished one
cannot be told from another process's batch of the same size). `cleanup` deletes the
batch once collected (its results go with it) when `BatchSettings.delete_files` is on.

Limits (https://docs.anthropic.com/en/docs/build-with-claude/batch-processing): 100,000
requests or 256 MB a batch, 24 hours to run, custom ids `^[a-zA-Z0-9_-]{1,64}$`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from stream_core import AssistantMessage, ErrorKind, Model
from stream_core.provider import (
    BatchCounts,
    BatchHTTPError,
    BatchPart,
    BatchSession,
    BatchState,
    BatchStatus,
    BatchWire,
    Outcome,
    RawResult,
    WireRequest,
    error_from_vendor,
    vendor_error_fields,
)

from ._anthropic_encode import STATUSES, message_body
from ._batch_lines import (
    Unreadable,
    clip,
    count,
    is_json,
    json_object,
    jsonl,
    protocol_result,
    rfc3339,
    salvage_id,
    text_of,
    unix_time,
)
from .anthropic import _BETAS, _VERSION, ERROR_TYPES

__all__ = [
    "BATCH",
    "BATCHES",
    "COUNTS",
    "LEFT",
    "RESULTS",
    "STATES",
    "STREAMING_BETAS",
    "STREAM_FIELDS",
    "batch_object",
    "create_headers",
    "read_result",
    "read_status",
    "result_line",
]

NAME = "anthropic-message-batches"
BATCHES = "/v1/messages/batches"
"""The batches' collection path (the model's base URL before it)."""

STATES: dict[str, BatchState] = {
    "in_progress": "running",
    "canceling": "cancelling",
    "ended": "ended",
}
"""`processing_status` -> our state (a word not here: `running`, polled again)."""

COUNTS: dict[str, str | None] = {
    "processing": None,
    "succeeded": "succeeded",
    "errored": "errored",
    "canceled": "cancelled",
    "expired": "expired",
}
"""`request_counts` field -> the `BatchCounts` field it is (None: still pending)."""

RESULTS: dict[str, Outcome] = {
    "succeeded": "succeeded",
    "errored": "errored",
    "canceled": "cancelled",
    "expired": "expired",
}
"""A result line's `result.type` -> the request's outcome."""

LEFT: dict[Outcome, tuple[ErrorKind, str]] = {
    "expired": ("expired", "the request did not run before the batch expired; resubmit it"),
    "cancelled": ("aborted", "the batch was cancelled before the request ran"),
}
"""The error kind and words of a request the vendor did not run."""

STREAM_FIELDS = frozenset({"stream"})
STREAMING_BETAS = frozenset(_BETAS)
"""The betas every stream asks for (fine-grained tool streaming): a batch has no stream."""

_PAGE = 100
_MAX_PAGES = 10_000


# --- lines and headers ---------------------------------------------------------------------


def line(custom_id: str, request: WireRequest, model: Model) -> dict[str, Any]:
    """One request: the planned payload without its streaming fields."""
    params = {k: v for k, v in request.payload.items() if k not in STREAM_FIELDS}
    return {"custom_id": custom_id, "params": params}


def _is_streaming(beta: str) -> bool:
    return beta in STREAMING_BETAS or "-streaming-" in beta


def create_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The create call's headers from the part's merged API headers: the API version, and
    the betas asked, once each, but the streaming-only ones."""
    out = {k.lower(): v for k, v in headers.items()}
    betas: list[str] = []
    for beta in out.pop("anthropic-beta", "").split(","):
        beta = beta.strip()
        if beta and beta not in betas and not _is_streaming(beta):
            betas.append(beta)
    if betas:
        out["anthropic-beta"] = ",".join(betas)
    out.setdefault("anthropic-version", _VERSION)
    return out


# --- the batch object ----------------------------------------------------------------------


def read_status(data: Any) -> BatchStatus:
    """A `message_batch` object, read; `BatchHTTPError` kind `protocol` without an id."""
    obj: dict[str, Any] = data if type(data) is dict else {}
    batch_id = obj.get("id")
    if not isinstance(batch_id, str) or not batch_id or len(batch_id) > 512:
        raise BatchHTTPError("protocol", 200, f"message batch: no id in {text_of(data)}")
    word = obj.get("processing_status")
    said = word if isinstance(word, str) else ""
    state = STATES.get(said, "running")
    raw = obj.get("request_counts")
    counts_in: dict[str, Any] = raw if type(raw) is dict else {}
    counts = {ours: 0 for ours in COUNTS.values() if ours is not None}
    total = 0
    for field, ours in COUNTS.items():
        n = count(counts_in.get(field))
        total += n
        if ours is not None:
            counts[ours] += n
    results_url = obj.get("results_url")
    return BatchStatus(
        id=batch_id,
        state=state,
        vendor_state=clip(said, 100),
        counts=BatchCounts(total=total, **counts),
        created_at=unix_time(obj.get("created_at")),
        expires_at=unix_time(obj.get("expires_at")),
        where={"results_url": results_url} if isinstance(results_url, str) else {},
    )


def batch_object(
    batch_id: str,
    state: BatchState,
    counts: BatchCounts,
    *,
    created_at: float,
    expires_at: float,
    ended_at: float | None = None,
    cancelled_at: float | None = None,
    results_url: str | None = None,
) -> dict[str, Any]:
    """A `message_batch` object as Anthropic answers it (the inverse of `read_status`)."""
    word = next((w for w, s in STATES.items() if s == state), None)
    if word is None:
        raise ValueError(f"Anthropic has no processing status for {state!r}")
    said = {ours: getattr(counts, ours) for ours in COUNTS.values() if ours is not None}
    request_counts = {
        field: (counts.pending if ours is None else said[ours]) for field, ours in COUNTS.items()
    }
    return {
        "id": batch_id,
        "type": "message_batch",
        "processing_status": word,
        "request_counts": request_counts,
        "ended_at": None if ended_at is None else rfc3339(ended_at),
        "created_at": rfc3339(created_at),
        "expires_at": rfc3339(expires_at),
        "archived_at": None,
        "cancel_initiated_at": None if cancelled_at is None else rfc3339(cancelled_at),
        "results_url": results_url,
    }


# --- result lines --------------------------------------------------------------------------


def read_result(n: int, value: Any, text: str) -> RawResult | None:
    """Result line `n` (parsed `value`, raw `text`); None when it names no custom id."""
    if not is_json(value) or type(value) is not dict:
        found = salvage_id(text)
        return None if found is None else protocol_result(found, n, "not a JSON object")
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return None
    result = value.get("result")
    if type(result) is not dict:
        return protocol_result(custom_id, n, f"`result` is {text_of(result)}")
    word = result.get("type")
    outcome = RESULTS.get(word) if isinstance(word, str) else None
    if outcome == "succeeded":
        message = result.get("message")
        if type(message) is not dict:
            return protocol_result(custom_id, n, f"`result.message` is {text_of(message)}")
        return RawResult(custom_id, "succeeded", body=message)
    if outcome == "errored":
        vendor_type, words = vendor_error_fields(result.get("error"))
        error = error_from_vendor(vendor_type, words, extra_kinds=ERROR_TYPES)
        status = STATUSES.get(vendor_type) if vendor_type else None
        return RawResult(
            custom_id, "errored", kind=error.kind, message=clip(error.message), status=status
        )
    if outcome is not None:
        kind, words = LEFT[outcome]
        return RawResult(custom_id, outcome, kind=kind, message=words)
    return protocol_result(custom_id, n, f"unknown `result.type` {text_of(word)}")


def result_line(
    custom_id: str,
    outcome: Outcome,
    *,
    message: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result line as Anthropic writes it (the inverse of `read_result`): `message` the
    whole answer of a succeeded request, `error` the error body of an errored one."""
    word = next(w for w, o in RESULTS.items() if o == outcome)
    result: dict[str, Any] = {"type": word}
    if outcome == "succeeded":
        result["message"] = message
    elif outcome == "errored":
        result["error"] = error
    return {"custom_id": custom_id, "result": result}


# --- the calls -----------------------------------------------------------------------------


def _batch_url(session: BatchSession, batch_id: str, tail: str = "") -> str:
    return session.url(f"{BATCHES}/{quote(batch_id, safe='')}{tail}")


async def submit(session: BatchSession, part: BatchPart) -> str:
    response = await session.send(
        "POST",
        session.url(BATCHES),
        json={"requests": part.lines},
        headers=create_headers(part.headers),
    )
    return read_status(json_object(response, "create message batch")).id


async def status(session: BatchSession, batch_id: str) -> BatchStatus:
    response = await session.send("GET", _batch_url(session, batch_id))
    return read_status(json_object(response, f"message batch {batch_id}"))


def _results_url(session: BatchSession, batch: BatchStatus) -> str:
    """The vendor's `results_url` when it is on the model's own host (the key goes with
    it), else the documented path under the model's base URL."""
    ours = _batch_url(session, batch.id, "/results")
    said = batch.where.get("results_url")
    if not isinstance(said, str):
        return ours
    try:
        a, b = urlsplit(said), urlsplit(ours)
    except ValueError:
        return ours
    same = (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
    return said if same and a.scheme in ("http", "https") else ours


async def results(session: BatchSession, batch: BatchStatus) -> AsyncIterator[RawResult]:
    response = await session.send("GET", _results_url(session, batch))
    unreadable = Unreadable(f"message batch {batch.id}")
    for result in unreadable.read(response.content, read_result):
        yield result
    unreadable.report()


async def cancel(session: BatchSession, batch_id: str) -> None:
    await session.send("POST", _batch_url(session, batch_id, "/cancel"))


async def listing(session: BatchSession) -> AsyncGenerator[BatchStatus, None]:
    after: str | None = None
    for _ in range(_MAX_PAGES):
        params = {"limit": str(_PAGE)}
        if after is not None:
            params["after_id"] = after
        response = await session.send("GET", session.url(BATCHES), params=params)
        page = json_object(response, "list message batches")
        items = page.get("data")
        for item in items if type(items) is list else ():
            try:
                yield read_status(item)
            except BatchHTTPError:
                continue  # an entry with no id is no batch of ours
        last = page.get("last_id")
        if page.get("has_more") is not True or not isinstance(last, str) or last == after:
            return
        after = last


async def _ours(session: BatchSession, batch: BatchStatus, ids: set[str]) -> bool | None:
    """Whether an ended batch's result lines are exactly the part's custom ids (None: it
    has not ended, so it cannot be told)."""
    if batch.state != "ended":
        return None
    try:
        response = await session.send("GET", _results_url(session, batch))
    except BatchHTTPError:
        return None
    said = set()
    for n, value, text in jsonl(response.content):
        result = read_result(n, value, text)
        if result is not None:
            said.add(result.custom_id)
    return said <= ids and bool(said)


async def find(session: BatchSession, part: BatchPart, since: float) -> list[str]:
    """The batches that may be the part's. Anthropic keeps no tag: these are the batches
    created since `since` (the engine's time, less its allowance for clock skew) with the
    part's request count; one that ended is read, and kept only when its result lines
    carry the part's custom ids. Those told by their results come first, then the others,
    newest first."""
    ids = {str(x.get("custom_id")) for x in part.lines}
    told: list[str] = []
    untold: list[str] = []
    async with contextlib.aclosing(listing(session)) as batches:
        async for batch in batches:
            if batch.created_at is None:
                continue
            if batch.created_at < since:
                break  # newest first: the rest are older
            if batch.counts.total != len(part.lines):
                continue
            verdict = await _ours(session, batch, ids)
            if verdict is True:
                told.append(batch.id)
            elif verdict is None:
                untold.append(batch.id)
    return told + untold


async def cleanup(session: BatchSession, batch: BatchStatus | None) -> None:
    """Delete the ended batch (and its results with it); nothing was uploaded."""
    if batch is None or batch.state != "ended" or not session.settings.delete_files:
        return
    await session.send("DELETE", _batch_url(session, batch.id), ok=(200, 204, 404))


def answer_body(message: AssistantMessage, model: Model) -> dict[str, Any]:
    """The `Message` a succeeded result line carries for `message`."""
    return message_body(message, model.id)


BATCH = BatchWire(
    name=NAME,
    line=line,
    submit=submit,
    status=status,
    results=results,
    cancel=cancel,
    listing=listing,
    find=find,
    cleanup=cleanup,
    max_requests=100_000,
    max_bytes=256 * 1000 * 1000,
    one_model=False,
    window_hours=24.0,
    custom_id_pattern=r"^[a-zA-Z0-9_-]{1,64}$",
    answer_body=answer_body,
)
