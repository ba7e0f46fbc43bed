"""The fake vendor's Vertex AI batch prediction, and the Cloud Storage JSON API it reads and
writes (`_batch_serve`).

Cloud Storage: `POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=...`,
`GET /storage/v1/b/{bucket}/o/{name}?alt=media`, `GET /storage/v1/b/{bucket}/o?prefix=...`,
`DELETE /storage/v1/b/{bucket}/o/{name}`; objects are the backend's files, their ids
`gs://bucket/name`. Vertex AI: `POST /v1/projects/{p}/locations/{l}/batchPredictionJobs`,
`GET .../batchPredictionJobs/{id}` (and the list), `POST .../{id}:cancel`, `DELETE`.

Once a job's results are final its `predictions.jsonl` is written under the output prefix
by the codec's writers (`providers/_vertex_batch.py`: `output_line`, `job_resource`,
`answer_body`, `status_text`): each line echoes the request, its `key` when the input line
had one, a `response` or a non-empty `status`. A request that expired or was cancelled has
no line: the job's state says why.
"""

from __future__ import annotations

import json
from typing import Any

from .._models import Model
from ..providers import _gcs
from ..providers import _vertex_batch as codec
from ._batch_serve import BatchBackend, FakeBatch, HTTPAnswer, HTTPAsk, route
from ._codec import http_error

API = "google-generative-ai"
VENDOR = "vertex"
_BUCKET = r"(?P<bucket>[a-z0-9][a-z0-9._-]+)"
_JOBS = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/batchPredictionJobs"
_ID = r"(?P<id>[A-Za-z0-9_-]+)"


def _error(kind: Any, text: str) -> HTTPAnswer:
    code, body = http_error(API, kind, text)
    return HTTPAnswer.of(code, body)


def _number(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() and len(text) < 9 else default


# --- Cloud Storage ---------------------------------------------------------------------------


@route("POST", rf"/upload/storage/v1/b/{_BUCKET}/o")
def put_object(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    name = ask.query.get("name", "")
    if not name:
        return _error("invalid_request", "name is required")
    uri = _gcs.gs_uri(ask.match["bucket"], name)
    backend.put_file(ask.body, name=name, id=uri)
    item = {"bucket": ask.match["bucket"], "name": name, "size": str(len(ask.body))}
    return HTTPAnswer.of(200, {"kind": "storage#object", **item})


@route("GET", rf"/storage/v1/b/{_BUCKET}/o/(?P<name>.+)")
def get_object(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    stored = backend.file(_gcs.gs_uri(ask.match["bucket"], ask.match["name"]))
    if stored is None:
        return _error("not_found", f"no such object: {ask.match['name']}")
    return HTTPAnswer(200, stored.data, media_type="application/octet-stream")


@route("GET", rf"/storage/v1/b/{_BUCKET}/o")
def list_objects(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    base = _gcs.gs_uri(ask.match["bucket"], "")
    wanted = base + ask.query.get("prefix", "")
    with backend.lock:
        found = sorted(
            (f.id, len(f.data)) for f in backend.files.values() if f.id.startswith(wanted)
        )
    start = _number(ask.query.get("pageToken"), 0)
    page = found[start : start + 2]  # small pages: a client must follow the token
    names = [i.removeprefix(base) for i, _ in page]
    body = _gcs.object_page(ask.match["bucket"], names, [s for _, s in page])
    if start + len(page) < len(found):
        body["nextPageToken"] = str(start + len(page))
    return HTTPAnswer.of(200, body)


@route("DELETE", rf"/storage/v1/b/{_BUCKET}/o/(?P<name>.+)")
def delete_object(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if not backend.delete_file(_gcs.gs_uri(ask.match["bucket"], ask.match["name"])):
        return _error("not_found", f"no such object: {ask.match['name']}")
    return HTTPAnswer(204, b"")


# --- batch prediction jobs -------------------------------------------------------------------


def _requests(backend: BatchBackend, source: Any, model: str) -> list[Any] | str:
    stored = backend.file(source) if isinstance(source, str) else None
    if stored is None:
        return f"input {source!r} not found"
    found: list[Any] = []
    for raw in stored.data.splitlines():
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError:
            return "input: a line that is not JSON"
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            return "input: each line needs a request"
        key = item.get("key")
        found.append((key if isinstance(key, str) else "", API, model, item["request"]))
    return found


@route("POST", _JOBS)
def create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    try:
        asked = ask.json()
    except ValueError:
        asked = None
    if not isinstance(asked, dict):
        return _error("invalid_request", "a job is required")
    model = str(asked.get("model", "")).rpartition("/")[2]
    source = ((asked.get("inputConfig") or {}).get("gcsSource") or {}).get("uris") or [None]
    output = ((asked.get("outputConfig") or {}).get("gcsDestination") or {}).get("outputUriPrefix")
    if not model or _gcs.parse_gs(output) is None:
        return _error("invalid_request", "model and outputConfig.gcsDestination are required")
    requests = _requests(backend, source[0], model)
    if isinstance(requests, str):
        return _error("invalid_request", requests)
    limit = backend.queue_limit
    if limit is not None and backend.queued() + len(requests) > limit:
        return _error("rate_limit", f"batch queue full: {limit} requests enqueued at most")
    where = f"projects/{ask.match['project']}/locations/{ask.match['location']}"
    meta = {
        "tag": str(asked.get("displayName", "")), "model": model, "source": source[0],
        "output": output, "where": where,
    }  # fmt: skip
    made = backend.create(VENDOR, requests, prefix="", meta=meta)
    return HTTPAnswer.of(200, _resource(backend, made))


def _written(backend: BatchBackend, batch: FakeBatch) -> tuple[Any, str | None]:
    """(what the job ended as, its output folder), once its results are final."""
    if batch.results is None:
        return None, None
    outcomes = {r.outcome for r in batch.results}
    ended_as = (
        "expired" if "expired" in outcomes else "cancelled" if "cancelled" in outcomes else None
    )
    folder = f"{batch.meta['output'].rstrip('/')}/prediction-model-{batch.id}"
    with backend.lock:
        if "output" in batch.result_files:
            return ended_as, folder
        model = Model(
            id=batch.meta["model"], api=API, provider="google-vertex", base_url="http://f"
        )
        lines: list[str] = []
        for (key, _, _, request), r in zip(batch.requests, batch.results, strict=True):
            body = error = None
            if r.outcome == "succeeded" and r.message is not None:
                body = codec.answer_body(r.message, model)
            elif r.outcome == "errored":
                error = codec.status_text(r.kind or "server", r.error, r.status)
            else:
                continue
            item = codec.output_line(key or None, request, body, error, batch.ends_at)
            lines.append(json.dumps(item))
        uri = f"{folder}/predictions.jsonl"
        backend.put_file("\n".join(lines).encode(), name="predictions.jsonl", id=uri)
        batch.result_files["output"] = uri
    return ended_as, folder


def _resource(backend: BatchBackend, batch: FakeBatch) -> dict[str, Any]:
    ended_as, folder = _written(backend, batch)
    results = batch.results or []
    succeeded = sum(r.outcome == "succeeded" for r in results)
    failed = sum(r.outcome == "errored" for r in results)
    stats = (succeeded, failed, len(batch.requests) - succeeded - failed)
    state = "ended" if folder is not None else "running"
    if folder is None and batch.cancelled_at is not None:
        state = "cancelling"
    return codec.job_resource(
        f"{batch.meta['where']}/batchPredictionJobs/{batch.id}", tag=batch.meta["tag"],
        model=batch.meta["model"], state=state, ended_as=ended_as, stats=stats,
        created=batch.created_at, source=batch.meta["source"], output=batch.meta["output"],
        folder=folder,
    )  # fmt: skip


def _job(backend: BatchBackend, ask: HTTPAsk) -> FakeBatch | None:
    return backend.get(ask.match["id"], VENDOR)


@route("GET", rf"{_JOBS}/{_ID}")
def get(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    job = _job(backend, ask)
    if job is None:
        return _error("not_found", f"job {ask.match['id']} not found")
    return HTTPAnswer.of(200, _resource(backend, job))


@route("GET", _JOBS)
def listing(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    jobs = backend.listing(VENDOR)
    size, start = _number(ask.query.get("pageSize"), 50), _number(ask.query.get("pageToken"), 0)
    page = jobs[start : start + max(size, 1)]
    body: dict[str, Any] = {"batchPredictionJobs": [_resource(backend, j) for j in page]}
    if start + len(page) < len(jobs):
        body["nextPageToken"] = str(start + len(page))
    return HTTPAnswer.of(200, body)


@route("POST", rf"{_JOBS}/{_ID}:cancel")
def cancel(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if _job(backend, ask) is None:
        return _error("not_found", f"job {ask.match['id']} not found")
    backend.cancel(ask.match["id"])
    return HTTPAnswer.of(200, {})


@route("DELETE", rf"{_JOBS}/{_ID}")
def delete(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if _job(backend, ask) is None or not backend.delete(ask.match["id"]):
        return _error("not_found", f"job {ask.match['id']} not found")
    return HTTPAnswer.of(200, {})
