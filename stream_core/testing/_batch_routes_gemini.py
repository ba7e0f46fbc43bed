"""The fake vendor's Gemini API batch mode and Files API (`_batch_serve`).

`POST /v1beta/models/{model}:batchGenerateContent` (inline requests or an uploaded file),
`GET /v1beta/batches/{id}`, `GET /v1beta/batches`, `POST /v1beta/batches/{id}:cancel`,
`DELETE /v1beta/batches/{id}`; the Files API's resumable upload (`POST /upload/v1beta/files`,
`start` then `upload, finalize` at the upload URL it gives), download
(`GET /download/v1beta/files/{id}:download`) and `DELETE /v1beta/files/{id}`.

Every shape is written by the codec (`providers/_gemini_batch.py`): the batch operation
(`batch_resource`, its state words from the codec's table), each result (`inline_response`,
`file_line`), the answer (`answer_body`) and a request's error (`error_object`). A request
that expired or was cancelled has no result: the batch's state says why.
"""

from __future__ import annotations

import json
from typing import Any

from .._models import Model
from ..providers import _gemini_batch as codec
from ._batch_serve import BatchBackend, FakeBatch, HTTPAnswer, HTTPAsk, route
from ._codec import http_error

API = "google-generative-ai"
VENDOR = "gemini"
_ID = r"(?P<id>[A-Za-z0-9_.-]+)"


def _error(kind: Any, text: str, status: int | None = None) -> HTTPAnswer:
    code, body = http_error(API, kind, text, status)
    return HTTPAnswer.of(code, body)


def _body(ask: HTTPAsk) -> Any:
    try:
        return ask.json()
    except ValueError:
        return None


# --- files ---------------------------------------------------------------------------------


def _file_resource(stored: Any) -> dict[str, Any]:
    return {
        "name": f"files/{stored.id}",
        "displayName": stored.name,
        "mimeType": stored.media_type,
        "sizeBytes": str(len(stored.data)),
        "state": "ACTIVE",
    }


@route("POST", r"/upload/v1beta/files")
def upload(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    command = ask.headers.get("x-goog-upload-command", "")
    if "start" in command:
        asked = _body(ask)
        file = asked.get("file") if isinstance(asked, dict) else None
        name = file.get("displayName") if isinstance(file, dict) else None
        stored = backend.put_file(b"", name=str(name or "upload"), purpose="upload")
        host = ask.headers.get("host", "127.0.0.1")
        url = f"http://{host}/upload/v1beta/files?upload_id={stored.id}&upload_protocol=resumable"
        headers = {"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"}
        return HTTPAnswer.of(200, {}, **headers)
    pending = backend.file(ask.query.get("upload_id", ""))
    if pending is None or pending.purpose != "upload" or "finalize" not in command:
        return _error("invalid_request", "no such upload, or it was not finalized")
    with backend.lock:
        pending.data, pending.purpose = ask.body, "batch"
    final = {"X-Goog-Upload-Status": "final"}
    return HTTPAnswer.of(200, {"file": _file_resource(pending)}, **final)


@route("GET", rf"/download/v1beta/files/{_ID}:download")
def download(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    stored = backend.file(ask.match["id"])
    if stored is None:
        return _error("not_found", f"file {ask.match['id']} not found")
    return HTTPAnswer(200, stored.data, media_type="application/jsonl")


@route("GET", rf"/v1beta/files/{_ID}")
def file_get(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    stored = backend.file(ask.match["id"])
    if stored is None:
        return _error("not_found", f"file {ask.match['id']} not found")
    return HTTPAnswer.of(200, _file_resource(stored))


@route("DELETE", rf"/v1beta/files/{_ID}")
def file_delete(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if not backend.delete_file(ask.match["id"]):
        return _error("not_found", f"file {ask.match['id']} not found")
    return HTTPAnswer.of(200, {})


# --- batches -------------------------------------------------------------------------------


def _requests(config: Any, backend: BatchBackend, model: str) -> list[Any] | str:
    """(custom id, API, model, payload) of each request, or why there are none."""
    if not isinstance(config, dict):
        return "batch.inputConfig is required"
    found: list[Any] = []
    name = config.get("fileName", config.get("file_name"))
    if isinstance(name, str):
        stored = backend.file(name.removeprefix("files/"))
        if stored is None:
            return f"input file {name} not found"
        for raw in stored.data.splitlines():
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                return "input file: a line that is not JSON"
            if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
                return "input file: each line needs a request"
            found.append((str(item.get("key", "")), API, model, item["request"]))
        return found
    inline = config.get("requests")
    items = inline.get("requests") if isinstance(inline, dict) else None
    if not isinstance(items, list):
        return "batch.inputConfig needs requests or a fileName"
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            return "each inlined request needs a request"
        meta = item.get("metadata")
        key = meta.get("key", "") if isinstance(meta, dict) else ""
        found.append((str(key), API, model, item["request"]))
    return found


@route("POST", r"/v1beta/models/(?P<model>[^/:]+):batchGenerateContent")
def create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    asked = _body(ask)
    batch = asked.get("batch") if isinstance(asked, dict) else None
    if not isinstance(batch, dict):
        return _error("invalid_request", "batch is required")
    model = ask.match["model"]
    config = batch.get("inputConfig", batch.get("input_config"))
    requests = _requests(config, backend, model)
    if isinstance(requests, str):
        return _error("invalid_request", requests)
    if not requests:
        return _error("invalid_request", "a batch needs at least one request")
    limit = backend.queue_limit
    if limit is not None and backend.queued() + len(requests) > limit:
        return _error("rate_limit", f"batch queue full: {limit} requests enqueued at most")
    tag = batch.get("displayName", batch.get("display_name"))
    mode = "file" if isinstance(config, dict) and "fileName" in config else "inline"
    meta: dict[str, Any] = {"tag": str(tag or ""), "model": model, "mode": mode}
    if isinstance(config, dict) and mode == "file":
        meta["source"] = str(config.get("fileName"))
    elif isinstance(config, dict):
        meta["source"] = config["requests"]["requests"]
    made = backend.create(VENDOR, requests, prefix="gb", meta=meta)
    return HTTPAnswer.of(200, _resource(backend, made))


def _written(backend: BatchBackend, batch: FakeBatch) -> tuple[Any, dict[str, Any] | None]:
    """(what the batch ended as, its output), once its results are final."""
    if batch.results is None:
        return None, None
    outcomes = {r.outcome for r in batch.results}
    ended_as = (
        "expired" if "expired" in outcomes else "cancelled" if "cancelled" in outcomes else None
    )
    model = Model(id=batch.meta["model"], api=API, provider="google", base_url="http://fake")
    writer = codec.file_line if batch.meta.get("mode") == "file" else codec.inline_response
    items: list[Any] = []
    for r in batch.results:
        if r.outcome == "succeeded" and r.message is not None:
            items.append(writer(r.custom_id, codec.answer_body(r.message, model), None))
        elif r.outcome == "errored":
            items.append(writer(r.custom_id, None, codec.error_object(r.kind or "server", r.error)))
    if batch.meta.get("mode") != "file":
        return ended_as, {"inline": items}
    with backend.lock:
        file_id = batch.result_files.get("output")
        if file_id is None:
            data = "\n".join(json.dumps(i) for i in items).encode()
            file_id = backend.put_file(data, name=f"{batch.id}-results", purpose="batch_output").id
            batch.result_files["output"] = file_id
    return ended_as, {"file": f"files/{file_id}"}


def _resource(backend: BatchBackend, batch: FakeBatch) -> dict[str, Any]:
    ended_as, output = _written(backend, batch)
    results = batch.results or []
    stats = (
        len(batch.requests),
        sum(r.outcome == "succeeded" for r in results),
        sum(r.outcome == "errored" for r in results),
    )
    return codec.batch_resource(
        f"batches/{batch.id}", tag=batch.meta.get("tag", ""), model=batch.meta["model"],
        state="ended" if output is not None else "running", ended_as=ended_as, stats=stats,
        created=batch.created_at, output=output, source=batch.meta.get("source"),
    )  # fmt: skip


def _batch(backend: BatchBackend, ask: HTTPAsk) -> FakeBatch | None:
    return backend.get(ask.match["id"], VENDOR)


@route("GET", rf"/v1beta/batches/{_ID}")
def get(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = _batch(backend, ask)
    if batch is None:
        return _error("not_found", f"batch {ask.match['id']} not found")
    return HTTPAnswer.of(200, _resource(backend, batch))


def _number(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() and len(text) < 9 else default


@route("GET", r"/v1beta/batches")
def listing(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batches = backend.listing(VENDOR)
    size = _number(ask.query.get("pageSize"), 50)
    start = _number(ask.query.get("pageToken"), 0)
    page = batches[start : start + max(size, 1)]
    body: dict[str, Any] = {"operations": [_resource(backend, b) for b in page]}
    if start + len(page) < len(batches):
        body["nextPageToken"] = str(start + len(page))
    return HTTPAnswer.of(200, body)


@route("POST", rf"/v1beta/batches/{_ID}:cancel")
def cancel(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if _batch(backend, ask) is None:
        return _error("not_found", f"batch {ask.match['id']} not found")
    backend.cancel(ask.match["id"])
    return HTTPAnswer.of(200, {})


@route("DELETE", rf"/v1beta/batches/{_ID}")
def delete(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    if _batch(backend, ask) is None or not backend.delete(ask.match["id"]):
        return _error("not_found", f"batch {ask.match['id']} not found")
    return HTTPAnswer.of(200, {})
