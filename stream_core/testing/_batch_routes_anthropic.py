"""The fake vendor's Anthropic Message Batches: create, poll, list, cancel, results, delete.

Shapes and words are the batch codec's (`providers/_anthropic_batch.py`): its batch object
and result-line writers, its status and result tables; whole answers are written with its
`answer_body`, errors with the Anthropic dialect's `error_body`. A batch's requests name
their own models (`params.model`), each answered from that model's scenario.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from .._batch_wire import BatchCounts, BatchState, Outcome
from .._models import Model
from .._types import ErrorKind
from ..providers import _anthropic_batch as codec
from ..providers._anthropic_encode import error_body
from ._batch_serve import BatchBackend, FakeBatch, FakeResult, HTTPAnswer, HTTPAsk, route

__all__ = ["API", "VENDOR"]

VENDOR = "anthropic"
API = "anthropic-messages"
_ID = r"(?P<id>[A-Za-z0-9_-]{1,200})"
_BATCHES = re.escape(codec.BATCHES)
_CUSTOM_ID = re.compile(codec.BATCH.custom_id_pattern)
_MEDIA_JSONL = "application/x-jsonl"


def _error(kind: ErrorKind, message: str) -> HTTPAnswer:
    status, body = error_body(kind, message)
    return HTTPAnswer.of(status, body)


def _gone(batch_id: str) -> HTTPAnswer:
    return _error("not_found", f"message batch {batch_id!r} not found")


def _counts(batch: FakeBatch) -> BatchCounts:
    total = len(batch.requests)
    if batch.results is None:
        return BatchCounts(total=total)
    seen = {"succeeded": 0, "errored": 0, "expired": 0, "cancelled": 0}
    for r in batch.results:
        seen[r.outcome] += 1
    return BatchCounts(total=total, **seen)


def _ended_at(backend: BatchBackend, batch: FakeBatch) -> float:
    if batch.cancelled_at is not None:
        return batch.cancelled_at + backend.cancel_delay
    if batch.expires_at is not None and batch.expires_at <= batch.ends_at:
        return batch.expires_at
    return batch.ends_at


def _object(backend: BatchBackend, batch: FakeBatch) -> dict[str, Any]:
    state = batch.state(backend.clock())
    ended = state == "ended"
    window = codec.BATCH.window_hours * 3600
    return codec.batch_object(
        batch.id,
        cast(BatchState, state),
        _counts(batch),
        created_at=batch.created_at,
        expires_at=batch.expires_at or batch.created_at + window,
        ended_at=_ended_at(backend, batch) if ended else None,
        cancelled_at=batch.cancelled_at,
        results_url=f"{backend.server.url}{codec.BATCHES}/{batch.id}/results" if ended else None,
    )


def _requests(data: Any) -> list[tuple[str, str, str, dict[str, Any]]] | str:
    """The create call's requests, or why they are refused."""
    requests = data.get("requests") if type(data) is dict else None
    if type(requests) is not list or not requests:
        return "requests: a non-empty list is required"
    if len(requests) > codec.BATCH.max_requests:
        return f"requests: at most {codec.BATCH.max_requests:,} a batch"
    out: list[tuple[str, str, str, dict[str, Any]]] = []
    seen: set[str] = set()
    for n, item in enumerate(requests):
        where = f"requests.{n}"
        custom_id = item.get("custom_id") if type(item) is dict else None
        if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
            return f"{where}.custom_id: must match {codec.BATCH.custom_id_pattern}"
        if custom_id in seen:
            return f"{where}.custom_id: {custom_id!r} is used twice"
        seen.add(custom_id)
        params = item.get("params")
        if type(params) is not dict:
            return f"{where}.params: an object is required"
        model = params.get("model")
        if not isinstance(model, str) or not model:
            return f"{where}.params.model: a model is required"
        if any(k in params for k in codec.STREAM_FIELDS):
            return f"{where}.params: streaming is not supported in a message batch"
        out.append((custom_id, API, model, params))
    return out


@route("POST", _BATCHES)
def create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    try:
        data = ask.json()
    except ValueError:
        return _error("invalid_request", "the body is not JSON")
    requests = _requests(data)
    if isinstance(requests, str):
        return _error("invalid_request", requests)
    limit = backend.queue_limit
    if limit is not None and backend.queued() + len(requests) > limit:
        return _error(
            "rate_limit", f"batch queue full: {backend.queued():,} requests queued of {limit:,}"
        )
    meta = {"headers": {k: v for k, v in ask.headers.items() if k.startswith("anthropic-")}}
    batch = backend.create(VENDOR, requests, prefix="msgbatch_", meta=meta)
    return HTTPAnswer.of(200, _object(backend, batch))


@route("GET", _BATCHES)
def listing(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    text = ask.query.get("limit", "20")
    limit = int(text) if text.isdigit() else 0
    if not 1 <= limit <= 1000:
        return _error("invalid_request", "limit: an integer from 1 to 1000")
    batches = backend.listing(VENDOR)
    after, before = ask.query.get("after_id"), ask.query.get("before_id")
    ids = [b.id for b in batches]
    if after is not None:
        batches = batches[ids.index(after) + 1 :] if after in ids else []
    elif before is not None:
        batches = batches[: ids.index(before)] if before in ids else []
        batches = batches[-limit:]
    page = batches[:limit]
    return HTTPAnswer.of(
        200,
        {
            "data": [_object(backend, b) for b in page],
            "has_more": len(batches) > len(page),
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
        },
    )


@route("GET", f"{_BATCHES}/{_ID}")
def retrieve(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _gone(ask.match["id"])
    return HTTPAnswer.of(200, _object(backend, batch))


@route("POST", f"{_BATCHES}/{_ID}/cancel")
def cancel(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _gone(ask.match["id"])
    backend.cancel(batch.id)
    return HTTPAnswer.of(200, _object(backend, batch))


@route("DELETE", f"{_BATCHES}/{_ID}")
def delete(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _gone(ask.match["id"])
    if batch.state(backend.clock()) != "ended":
        return _error("invalid_request", "a batch must end (or be cancelled) to be deleted")
    backend.delete(batch.id)
    return HTTPAnswer.of(200, {"id": batch.id, "type": "message_batch_deleted"})


def result_line(backend: BatchBackend, model: str, r: FakeResult) -> dict[str, Any]:
    """One request's fate as its result line."""
    outcome = cast(Outcome, r.outcome)
    if outcome == "succeeded" and r.message is not None:
        sent = Model(id=model, api=API, provider=VENDOR, base_url=backend.server.url)
        return codec.result_line(r.custom_id, outcome, message=codec.answer_body(r.message, sent))
    if outcome in ("succeeded", "errored"):
        kind = cast(ErrorKind, r.kind or "server")
        _, body = error_body(kind, r.error or "the request failed")
        return codec.result_line(r.custom_id, "errored", error=body)
    return codec.result_line(r.custom_id, outcome)


@route("GET", f"{_BATCHES}/{_ID}/results")
def results(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _gone(ask.match["id"])
    if batch.results is None:
        return _error("invalid_request", f"message batch {batch.id} has not ended yet")
    models = {custom_id: model for custom_id, _, model, _ in batch.requests}
    lines = [result_line(backend, models[r.custom_id], r) for r in batch.results]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return HTTPAnswer(200, body, media_type=_MEDIA_JSONL)
