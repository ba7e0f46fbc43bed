"""The fake vendor's Mistral batch inference: the files API (upload, read, delete) and batch
jobs (create, poll, list, cancel).

Shapes and words are the batch codec's (`providers/_mistral_batch.py`): its job, file and
result-line writers and its status tables; whole answers are written with its
`answer_body`, errors with the Chat error bodies (`_chat_encode.error_body`). A job runs
one model (its `model`), whatever its lines' bodies name. When a job ends its output file
(succeeded lines) and error file (errored lines) are written; requests it did not run
(timed out, cancelled) have no line, as Mistral's.

The files endpoints share their paths with OpenAI's (`/v1/files`, the same multipart form):
they are registered here only when no vendor module loaded before answers them already;
either answers from the same store.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from .._batch_wire import Outcome
from .._models import Model
from .._types import ErrorKind
from ..providers import _mistral_batch as codec
from ..providers._batch_lines import unix_time
from ..providers._chat_encode import error_body
from ._batch_serve import (
    BATCH_ROUTES,
    BatchBackend,
    FakeBatch,
    FakeResult,
    HTTPAnswer,
    HTTPAsk,
    route,
)

__all__ = ["API", "VENDOR"]

VENDOR = "mistral"
API = "mistral-conversations"
_ID = r"(?P<id>[A-Za-z0-9_.-]{1,200})"
_JOBS = re.escape(codec.JOBS)
_FILES = re.escape(codec.FILES)
_CUSTOM_ID = re.compile(codec.BATCH.custom_id_pattern)
_BOUNDARY = re.compile(r'boundary="?([^";]+)"?')
_NAME = re.compile(rb'\bname="([^"]*)"')
_FILENAME = re.compile(rb'\bfilename="([^"]*)"')


def _error(kind: ErrorKind, message: str) -> HTTPAnswer:
    status, body = error_body(kind, message)
    return HTTPAnswer.of(status, body)


def _gone(what: str, id: str) -> HTTPAnswer:
    return _error("not_found", f"{what} {id!r} not found")


# --- files ---------------------------------------------------------------------------------


def _form(ask: HTTPAsk) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (file name or None, bytes)."""
    found = _BOUNDARY.search(ask.headers.get("content-type", ""))
    if found is None:
        return {}
    fields: dict[str, tuple[str | None, bytes]] = {}
    for chunk in ask.body.split(b"--" + found.group(1).encode())[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        name, filename = _NAME.search(head), _FILENAME.search(head)
        if name is not None:
            said = filename.group(1).decode("utf-8", "replace") if filename else None
            fields[name.group(1).decode("utf-8", "replace")] = (said, data.removesuffix(b"\r\n"))
    return fields


def upload(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    form = _form(ask)
    if "file" not in form:
        return _error("invalid_request", "file: a multipart file field is required")
    name, data = form["file"]
    purpose = form.get("purpose", (None, b"batch"))[1].decode("utf-8", "replace")
    stored = backend.put_file(data, name=name or "upload.jsonl", purpose=purpose)
    return HTTPAnswer.of(
        200, codec.file_object(stored.id, stored.name, len(data), stored.created_at)
    )


def content(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    stored = backend.file(ask.match["id"])
    if stored is None:
        return _gone("file", ask.match["id"])
    return HTTPAnswer(200, stored.data, media_type="application/octet-stream")


def delete_file(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if not backend.delete_file(ask.match["id"]):
        return _gone("file", ask.match["id"])
    return HTTPAnswer.of(200, {"id": ask.match["id"], "object": "file", "deleted": True})


def _unanswered(method: str, sample: str) -> bool:
    return not any(m == method and p.fullmatch(sample) for m, p, _ in BATCH_ROUTES)


for _method, _pattern, _sample, _handler in (
    ("POST", _FILES, codec.FILES, upload),
    ("GET", f"{_FILES}/{_ID}/content", f"{codec.FILES}/f/content", content),
    ("DELETE", f"{_FILES}/{_ID}", f"{codec.FILES}/f", delete_file),
):
    if _unanswered(_method, _sample):  # another vendor's module may answer the same paths
        route(_method, _pattern)(_handler)


# --- jobs ----------------------------------------------------------------------------------


def _lines(backend: BatchBackend, file_ids: list[str], model: str) -> list[Any] | str:
    """The requests of a job's input files, or why they are refused."""
    out: list[tuple[str, str, str, dict[str, Any]]] = []
    seen: set[str] = set()
    for file_id in file_ids:
        stored = backend.file(file_id)
        if stored is None:
            return f"input_files: file {file_id!r} not found"
        for n, raw in enumerate(stored.data.decode("utf-8", "replace").split("\n"), 1):
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                return f"{file_id} line {n}: not JSON"
            custom_id = item.get("custom_id") if type(item) is dict else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
                return f"{file_id} line {n}: custom_id must match {_CUSTOM_ID.pattern}"
            if custom_id in seen:
                return f"{file_id} line {n}: custom_id {custom_id!r} is used twice"
            seen.add(custom_id)
            body = item.get("body")
            if type(body) is not dict or any(k in body for k in codec.STREAM_FIELDS):
                return f"{file_id} line {n}: body must be a chat request without streaming"
            out.append((custom_id, API, model, body))
    if not out:
        return "input_files: no requests"
    if len(out) > codec.BATCH.max_requests:
        return f"input_files: at most {codec.BATCH.max_requests:,} requests a job"
    return out


@route("POST", _JOBS)
def create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    try:
        data = ask.json()
    except ValueError:
        return _error("invalid_request", "the body is not JSON")
    job: dict[str, Any] = data if type(data) is dict else {}
    files, model = job.get("input_files"), job.get("model")
    if job.get("endpoint") != codec.ENDPOINT:
        return _error("invalid_request", f"endpoint: only {codec.ENDPOINT} here")
    if not isinstance(model, str) or not model:
        return _error("invalid_request", "model: a model is required")
    if type(files) is not list or not all(isinstance(f, str) for f in files):
        return _error("invalid_request", "input_files: a list of file ids is required")
    metadata = job.get("metadata") or {}
    if type(metadata) is not dict or not all(isinstance(v, str) for v in metadata.values()):
        return _error("invalid_request", "metadata: an object of strings")
    hours = job.get("timeout_hours", int(codec.BATCH.window_hours))
    if type(hours) is not int or not 1 <= hours <= 168:
        return _error("invalid_request", "timeout_hours: an integer from 1 to 168")
    requests = _lines(backend, files, model)
    if isinstance(requests, str):
        return _error("invalid_request", requests)
    limit = backend.queue_limit
    if limit is not None and backend.queued() + len(requests) > limit:
        return _error(
            "rate_limit", f"batch queue full: {backend.queued():,} requests queued of {limit:,}"
        )
    meta = {"model": model, "metadata": metadata, "input_files": files, "timeout_hours": hours}
    batch = backend.create(VENDOR, requests, prefix="batchjob-", meta=meta)
    return HTTPAnswer.of(200, _job(backend, batch))


def _word(backend: BatchBackend, batch: FakeBatch) -> str:
    state = batch.state(backend.clock())
    if state != "ended" or batch.results is None:
        return next(w for w, s in codec.STATES.items() if s == state)
    outcomes = {r.outcome for r in batch.results}
    unrun: Outcome | None = None
    if "expired" in outcomes:
        unrun = "expired"
    elif "cancelled" in outcomes:
        unrun = "cancelled"
    return codec.ended_word(unrun)


def _answered(r: FakeResult) -> bool:
    return r.outcome == "succeeded" and r.message is not None


def _write_results(backend: BatchBackend, batch: FakeBatch) -> None:
    """The output and error files of an ended job, written once."""
    with backend.lock:
        if batch.results is None or batch.result_files.get("written"):
            return
        model = Model(id=batch.meta["model"], api=API, provider=VENDOR, base_url="http://fake")
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for n, r in enumerate(batch.results):
            line_id = f"{batch.id}-{n}"
            if _answered(r):
                assert r.message is not None
                body = codec.answer_body(r.message, model)
                output.append(codec.result_line(line_id, r.custom_id, body=body))
            elif r.outcome in ("succeeded", "errored"):
                kind = cast(ErrorKind, r.kind or "server")
                status, said = error_body(kind, r.error or "the request failed")
                errors.append(codec.result_line(line_id, r.custom_id, status=status, error=said))
        for key, lines in (("output", output), ("error", errors)):
            if lines:
                data = "".join(json.dumps(x) + "\n" for x in lines).encode()
                stored = backend.put_file(data, name=f"{batch.id}-{key}.jsonl")
                batch.result_files[key] = stored.id
        batch.result_files["written"] = "yes"


def _job(backend: BatchBackend, batch: FakeBatch) -> dict[str, Any]:
    word = _word(backend, batch)
    results = batch.results or []
    if batch.results is not None:
        _write_results(backend, batch)
    return codec.job_object(
        batch.id,
        word,
        model=batch.meta["model"],
        input_files=list(batch.meta["input_files"]),
        metadata=dict(batch.meta["metadata"]),
        created_at=batch.created_at,
        timeout_hours=batch.meta["timeout_hours"],
        total=len(batch.requests),
        succeeded=sum(_answered(r) for r in results),
        failed=sum(r.outcome in ("succeeded", "errored") and not _answered(r) for r in results),
        output_file=batch.result_files.get("output"),
        error_file=batch.result_files.get("error"),
    )  # fmt: skip


@route("GET", f"{_JOBS}/{_ID}")
def retrieve(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _gone("batch job", ask.match["id"])
    return HTTPAnswer.of(200, _job(backend, batch))


@route("POST", f"{_JOBS}/{_ID}/cancel")
def cancel(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _gone("batch job", ask.match["id"])
    backend.cancel(batch.id)
    return HTTPAnswer.of(200, _job(backend, batch))


def _number(text: str | None, default: int) -> int | None:
    if text is None:
        return default
    return int(text) if text.isdigit() and len(text) < 10 else None


@route("GET", _JOBS)
def listing(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    page, size = _number(ask.query.get("page"), 0), _number(ask.query.get("page_size"), 100)
    if page is None or size is None or not 1 <= size <= 1000:
        return _error("invalid_request", "page, page_size: integers (page_size 1 to 1000)")
    jobs = backend.listing(VENDOR)
    after = ask.query.get("created_after")
    if after is not None:
        since = unix_time(after)
        if since is None:
            return _error("invalid_request", "created_after: an ISO 8601 date-time")
        jobs = [j for j in jobs if j.created_at > since]
    if ask.query.get("order_by") == "created":
        jobs.reverse()
    shown = jobs[page * size : (page + 1) * size]
    data = [_job(backend, j) for j in shown]
    return HTTPAnswer.of(200, {"data": data, "object": "list", "total": len(jobs)})
