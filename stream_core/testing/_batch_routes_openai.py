"""The fake vendor's OpenAI Batch and Files endpoints (`/v1/files`, `/v1/batches`), backed
by `BatchBackend` and written with the codec's own writers and words
(`providers/_openai_batch_shapes.py`): a test of a batch pipeline meets the shapes the
codec reads, and a change to one is a change to both.

Validation is OpenAI's: a create the API refuses outright (no such file, an endpoint or
window it does not take, bad metadata) is a 4xx; a file whose lines are wrong (not JSON,
a custom id twice, another endpoint or model, too many) makes a batch that fails at
validation, its `errors.data` naming the line. A create that would bring the requests in
unfinished batches past `backend.queue_limit` fails the same way, with the enqueued
token limit's code. Files and batches live in the shared backend, so Mistral's
uploads (the same `/v1/files` endpoint and form) land here too.
"""

from __future__ import annotations

import json
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, cast

from .._models import Model
from .._usage import ErrorKind
from ..providers._chat_encode import error_body
from ..providers._openai_batch_shapes import (
    CANCELLED,
    CANCELLED_CODE,
    CANCELLED_TEXT,
    CANCELLING,
    COMPLETED,
    ENDPOINTS,
    EXPIRED,
    EXPIRED_CODE,
    EXPIRED_TEXT,
    FAILED,
    IN_PROGRESS,
    LINE_ERROR_CODES,
    MAX_BYTES,
    MAX_REQUESTS,
    OUTPUT_PURPOSE,
    QUEUE_FULL_CODE,
    VALIDATING,
    WINDOW_HOURS,
    answer_body,
    batch_object,
    file_object,
    list_page,
    result_line,
)
from ._batch_serve import BatchBackend, FakeBatch, FakeResult, HTTPAnswer, HTTPAsk, route

__all__ = ["VENDOR"]

VENDOR = "openai"
_APIS = {endpoint: api for api, endpoint in ENDPOINTS.items()}
_BASE = "http://fake-vendor.invalid/v1"
_MAX_METADATA = 16


def _error(kind: ErrorKind, text: str) -> HTTPAnswer:
    status, body = error_body(kind, text)
    return HTTPAnswer.of(status, body)


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()


# --- files ---------------------------------------------------------------------------------


def _form(ask: HTTPAsk) -> dict[str, tuple[str | None, bytes]] | None:
    """A multipart form's fields: name -> (file name, bytes); None when it is not one."""
    kind = ask.headers.get("content-type", "")
    if not kind.lower().startswith("multipart/form-data"):
        return None
    head = f"Content-Type: {kind}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    parsed: EmailMessage = BytesParser(policy=HTTP).parsebytes(head + ask.body)
    if not parsed.is_multipart():
        return None
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


@route("POST", r"/v1/files")
def _upload(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    form = _form(ask)
    if form is None or "file" not in form:
        return _error("invalid_request", "a file upload is a multipart form with a 'file' field")
    purpose = form.get("purpose", (None, b""))[1].decode("utf-8", "replace")
    if not purpose:
        return _error("invalid_request", "missing required parameter: 'purpose'")
    filename, data = form["file"]
    stored = backend.put_file(data, name=filename or "upload.jsonl", purpose=purpose)
    return HTTPAnswer.of(200, _file(stored.id, backend))


def _file(id: str, backend: BatchBackend) -> dict[str, Any]:
    stored = backend.file(id)
    assert stored is not None
    return file_object(
        stored.id, filename=stored.name, size=len(stored.data), created_at=stored.created_at,
        purpose=stored.purpose,
    )  # fmt: skip


@route("GET", r"/v1/files/(?P<id>[^/]+)")
def _file_get(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    id = ask.match["id"]
    if backend.file(id) is None:
        return _error("not_found", f"No such File object: {id}")
    return HTTPAnswer.of(200, _file(id, backend))


@route("GET", r"/v1/files/(?P<id>[^/]+)/content")
def _file_content(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    stored = backend.file(ask.match["id"])
    if stored is None:
        return _error("not_found", f"No such File object: {ask.match['id']}")
    return HTTPAnswer(200, stored.data, media_type="application/octet-stream")


@route("DELETE", r"/v1/files/(?P<id>[^/]+)")
def _file_delete(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    id = ask.match["id"]
    if not backend.delete_file(id):
        return _error("not_found", f"No such File object: {id}")
    return HTTPAnswer.of(200, {"id": id, "object": "file", "deleted": True})


# --- batches -------------------------------------------------------------------------------


def _refusal(data: Any) -> str | None:
    """Why OpenAI refuses this create outright (a 400), if it does."""
    if not isinstance(data, dict):
        return "the request body is not a JSON object"
    if not isinstance(data.get("input_file_id"), str):
        return "missing required parameter: 'input_file_id'"
    if data.get("endpoint") not in _APIS:
        return f"invalid 'endpoint': {data.get('endpoint')!r}; supported: {sorted(_APIS)}"
    if data.get("completion_window") != f"{WINDOW_HOURS}h":
        return f"invalid 'completion_window': {data.get('completion_window')!r}"
    meta = data.get("metadata")
    if meta is None:
        return None
    if not isinstance(meta, dict) or len(meta) > _MAX_METADATA:
        return f"'metadata' is at most {_MAX_METADATA} string pairs"
    for key, value in meta.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            return f"'metadata.{key[:64]}': keys of at most 64 and values of at most 512 chars"
    return None


def _read_lines(
    data: bytes, endpoint: str
) -> tuple[list[tuple[str, str, str, dict[str, Any]]], list[dict[str, Any]]]:
    """(the requests, the validation errors) of an input file."""
    requests: list[tuple[str, str, str, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()

    def fault(code: str, n: int, text: str) -> None:
        errors.append({"code": LINE_ERROR_CODES[code], "message": text, "param": None, "line": n})

    if len(data) > MAX_BYTES:
        fault("size", 0, f"the file is over {MAX_BYTES:,} bytes")
    for n, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            fault("json", n, "this line is not valid JSON")
            continue
        if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
            fault("body", n, "a line is an object with a 'body' object")
            continue
        cid, body = line.get("custom_id"), line["body"]
        if not isinstance(cid, str) or not cid or cid in seen:
            fault("custom_id", n, f"custom_id {cid!r} is missing or used twice")
            continue
        seen.add(cid)
        if line.get("url") != endpoint or line.get("method") != "POST":
            fault("url", n, f"this line's url is not the batch's endpoint {endpoint}")
            continue
        model = body.get("model")
        models.add(str(model))
        if not isinstance(model, str) or len(models) > 1:
            fault("model", n, "every line of a batch must name the same model")
            continue
        requests.append((cid, _APIS[endpoint], model, body))
    if len(requests) > MAX_REQUESTS:
        fault("size", 0, f"a batch takes at most {MAX_REQUESTS:,} requests")
    if not requests and not errors:
        fault("body", 0, "the input file has no requests")
    return requests, errors[:50]


@route("POST", r"/v1/batches")
def _create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    try:
        data = ask.json()
    except ValueError:
        data = None
    why = _refusal(data)
    if why is not None:
        return _error("invalid_request", why)
    stored = backend.file(data["input_file_id"])
    if stored is None:
        return _error("not_found", f"No such File object: {data['input_file_id']}")
    endpoint = data["endpoint"]
    requests, errors = _read_lines(stored.data, endpoint)
    meta = {
        "endpoint": endpoint, "input_file_id": stored.id, "metadata": data.get("metadata"),
        "model": requests[0][2] if requests else None, "errors": errors,
    }  # fmt: skip
    backend.listing(VENDOR)  # batches whose time came end now: the queue is what is left
    with backend.lock:
        limit = backend.queue_limit
        if not errors and limit is not None and backend.queued() + len(requests) > limit:
            errors.append(
                {
                    "code": QUEUE_FULL_CODE,
                    "message": f"Enqueued token limit reached for {meta['model']} in "
                    f"organization org-fake. Limit: {limit:,} enqueued requests. Please try "
                    "again once some in_progress batches have been completed.",
                    "param": None,
                    "line": None,
                }
            )
        batch = backend.create(VENDOR, [] if errors else requests, prefix="batch_", meta=meta)
        if errors:
            batch.results = []  # failed at validation: nothing runs, nothing is billed
            batch.meta["total"] = 0
            backend.created -= 1
        else:
            batch.meta["total"] = len(requests)
    return HTTPAnswer.of(200, _render(backend, batch, word=VALIDATING))


def _word(backend: BatchBackend, batch: FakeBatch) -> str:
    if backend.clock() < batch.created_at + backend.validation:
        return VALIDATING
    if batch.meta.get("errors"):
        return FAILED
    state = batch.state(backend.clock())
    if state == "cancelling":
        return CANCELLING
    if state == "running" or batch.results is None:
        return IN_PROGRESS
    if batch.cancelled_at is not None:
        return CANCELLED
    if any(r.outcome == "expired" for r in batch.results):
        return EXPIRED
    return COMPLETED


def _result(batch: FakeBatch, r: FakeResult, apis: dict[str, tuple[str, str]]) -> dict[str, Any]:
    if r.outcome == "expired":
        return result_line(r.custom_id, code=EXPIRED_CODE, message=EXPIRED_TEXT)
    if r.outcome == "cancelled":
        return result_line(r.custom_id, code=CANCELLED_CODE, message=CANCELLED_TEXT)
    if r.outcome == "succeeded" and r.message is not None:
        api, model_id = apis[r.custom_id]
        model = Model(id=model_id, api=api, provider=VENDOR, base_url=_BASE)
        return result_line(r.custom_id, body=answer_body(r.message, model))
    kind = cast(ErrorKind, r.kind or "server")
    status, body = error_body(kind, r.error or "the request failed")
    return result_line(r.custom_id, body=body, status=status)


def _write_results(backend: BatchBackend, batch: FakeBatch) -> None:
    """The output and error files of an ended batch, written once."""
    with backend.lock:
        if batch.results is None or batch.result_files or batch.meta.get("errors"):
            return
        apis = {cid: (api, model) for cid, api, model, _ in batch.requests}
        out = [_result(batch, r, apis) for r in batch.results if r.outcome == "succeeded"]
        err = [_result(batch, r, apis) for r in batch.results if r.outcome != "succeeded"]
        for kind, lines in (("output", out), ("error", err)):
            if lines:
                name = f"{batch.id}_{kind}.jsonl"
                stored = backend.put_file(_jsonl(lines), name=name, purpose=OUTPUT_PURPOSE)
                batch.result_files[kind] = stored.id
        batch.result_files.setdefault("written", "")


def _render(backend: BatchBackend, batch: FakeBatch, word: str | None = None) -> dict[str, Any]:
    word = word or _word(backend, batch)
    results = batch.results or []
    if word not in (VALIDATING, IN_PROGRESS, CANCELLING):
        _write_results(backend, batch)
    succeeded = sum(r.outcome == "succeeded" for r in results)
    errored = sum(r.outcome == "errored" for r in results)
    times = {IN_PROGRESS: batch.created_at} if word != VALIDATING else {}
    if batch.cancelled_at is not None:
        times[CANCELLING] = batch.cancelled_at
    if word in (COMPLETED, EXPIRED, CANCELLED, FAILED):
        times[word] = min(backend.clock(), batch.expires_at or batch.ends_at, batch.ends_at)
    meta = batch.meta
    expires = batch.expires_at or batch.created_at + WINDOW_HOURS * 3600
    files = batch.result_files
    return batch_object(
        batch.id, status=word, endpoint=meta["endpoint"], input_file_id=meta["input_file_id"],
        created_at=batch.created_at, expires_at=expires,
        counts=(int(meta.get("total") or 0), succeeded, errored),
        output_file_id=files.get("output") or None, error_file_id=files.get("error") or None,
        errors=meta.get("errors") or (), metadata=meta.get("metadata"), model=meta.get("model"),
        times=times,
    )  # fmt: skip


@route("GET", r"/v1/batches/(?P<id>[^/]+)")
def _get(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _error("not_found", f"No batch found with id '{ask.match['id']}'.")
    return HTTPAnswer.of(200, _render(backend, batch))


@route("POST", r"/v1/batches/(?P<id>[^/]+)/cancel")
def _cancel(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = backend.get(ask.match["id"], VENDOR)
    if batch is None:
        return _error("not_found", f"No batch found with id '{ask.match['id']}'.")
    word = _word(backend, batch)
    if word in (COMPLETED, EXPIRED, FAILED):
        return _error("invalid_request", f"Cannot cancel a batch with status '{word}'.")
    backend.cancel(batch.id)
    return HTTPAnswer.of(200, _render(backend, batch))


@route("GET", r"/v1/batches")
def _list(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    try:
        limit = min(max(int(ask.query.get("limit", "20")), 1), 100)
    except ValueError:
        return _error("invalid_request", f"invalid 'limit': {ask.query.get('limit')!r}")
    batches = backend.listing(VENDOR)
    after = ask.query.get("after")
    if after is not None:
        ids = [b.id for b in batches]
        batches = batches[ids.index(after) + 1 :] if after in ids else []
    page = [_render(backend, b) for b in batches[:limit]]
    return HTTPAnswer.of(200, list_page(page, has_more=len(batches) > limit))
