"""Mistral batch inference (`POST /v1/batch/jobs`): the batch codec.

A part is one JSONL file uploaded to the files API (`POST /v1/files`, multipart,
`purpose=batch`), each line `{"custom_id", "body"}`, `body` being the chat request
`stream()` sends (`/v1/chat/completions`) without `stream`; the job names the file, the
endpoint, the model (one a job), `timeout_hours` (`BatchSettings.window_hours`, else 24)
and our tag in its `metadata` (`TAG_KEY`), so `find` can tell a part's job after a crash.
The job is polled at `/v1/batch/jobs/{id}` (`status`, `total_requests`,
`succeeded_requests`, `failed_requests`); once it ended its results are in `output_file`
and `error_file`, one line a request: `{"id", "custom_id", "response": {"status_code",
"body"}, "error"}`. A job that ran out of time (`TIMEOUT_EXCEEDED`) or was cancelled has no
line for the requests it did not run: `results` reads the input file back for their ids
and gives each the outcome `LEFT` names (expired, cancelled), so no request is lost.

The per-request `x-affinity` header (`StreamOptions.session_id`) routes a live session to
one replica; a batch has none, so the part's headers are not sent. `cleanup` deletes the
input file(s) the part uploaded and the job's output and error files.

Limits (https://docs.mistral.ai/capabilities/batch, known limitations): 100,000 requests
and 512 MB a file; one model a job.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any
from urllib.parse import quote

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
    error_from_status,
    error_from_vendor,
    vendor_error_fields,
)

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
from ._chat_encode import finish_reason, message_body
from .mistral import API, WIRE

__all__ = [
    "BATCH",
    "ENDPOINT",
    "FILES",
    "JOBS",
    "LEFT",
    "STATES",
    "STREAM_FIELDS",
    "TAG_KEY",
    "ended_word",
    "file_object",
    "job_object",
    "read_result",
    "read_status",
    "result_line",
]

NAME = "mistral-batch"
JOBS = "/v1/batch/jobs"
FILES = "/v1/files"
ENDPOINT = "/v1/chat/completions"
"""The endpoint each line's body is for (the path the provider streams from)."""
TAG_KEY = "stream_core_tag"
"""The job's `metadata` key holding our tag (`BatchPart.tag`)."""

STATES: dict[str, BatchState] = {
    "QUEUED": "submitted",
    "RUNNING": "running",
    "SUCCESS": "ended",
    "FAILED": "failed",
    "TIMEOUT_EXCEEDED": "ended",
    "CANCELLATION_REQUESTED": "cancelling",
    "CANCELLED": "ended",
}
"""A job's `status` -> our state (a word not here: `running`, polled again). A `FAILED`
job with an output or error file is `ended`: its lines are read."""

LEFT: dict[str, tuple[Outcome, ErrorKind, str]] = {
    "TIMEOUT_EXCEEDED": (
        "expired", "expired", "the request did not run before the job timed out; resubmit it",
    ),
    "CANCELLED": ("cancelled", "aborted", "the job was cancelled before the request ran"),
    "FAILED": ("errored", "server", "the job failed before the request ran"),
    "SUCCESS": ("errored", "protocol", "the job ended without a result line for the request"),
}  # fmt: skip
"""An ended job's `status` -> what became of a request with no result line (outcome,
error kind, words)."""

STREAM_FIELDS = frozenset({"stream", "stream_options"})

_PAGE = 100
_MAX_PAGES = 10_000
_SUCCESS = 200


# --- lines ---------------------------------------------------------------------------------


def line(custom_id: str, request: WireRequest, model: Model) -> dict[str, Any]:
    """One request: the planned payload without its streaming fields."""
    body = {k: v for k, v in request.payload.items() if k not in STREAM_FIELDS}
    return {"custom_id": custom_id, "body": body}


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 512 else None


# --- the job -------------------------------------------------------------------------------


def read_status(data: Any) -> BatchStatus:
    """A batch job object, read; `BatchHTTPError` kind `protocol` without an id."""
    obj: dict[str, Any] = data if type(data) is dict else {}
    job_id = _id(obj.get("id"))
    if job_id is None:
        raise BatchHTTPError("protocol", 200, f"batch job: no id in {text_of(data)}")
    word = obj.get("status")
    said = word if isinstance(word, str) else ""
    state = STATES.get(said, "running")
    output, error_file = _id(obj.get("output_file")), _id(obj.get("error_file"))
    if state == "failed" and (output or error_file):
        state = "ended"
    total = count(obj.get("total_requests"))
    succeeded = count(obj.get("succeeded_requests"))
    failed = count(obj.get("failed_requests"))
    rest = max(total - succeeded - failed, 0) if state == "ended" else 0
    left = LEFT.get(said, LEFT["SUCCESS"])[0]
    counts = BatchCounts(
        total=total,
        succeeded=succeeded,
        errored=failed + (rest if left == "errored" else 0),
        expired=rest if left == "expired" else 0,
        cancelled=rest if left == "cancelled" else 0,
    )
    created = unix_time(obj.get("created_at"))
    hours = obj.get("timeout_hours")
    expires = None
    if created is not None and type(hours) is int and 0 < hours <= 10_000:
        expires = created + hours * 3600
    metadata = obj.get("metadata")
    tag = metadata.get(TAG_KEY) if type(metadata) is dict else None
    inputs = obj.get("input_files")
    where: dict[str, Any] = {
        "input_files": [f for f in inputs if _id(f)] if type(inputs) is list else [],
        "output_file": output,
        "error_file": error_file,
    }
    model = obj.get("model")
    return BatchStatus(
        id=job_id,
        state=state,
        vendor_state=clip(said, 100),
        counts=counts,
        created_at=created,
        expires_at=expires,
        tag=tag if isinstance(tag, str) else None,
        where=where,
        error=_errors(obj.get("errors")),
        model=clip(model, 200) if isinstance(model, str) else None,
    )


def _errors(value: Any) -> str | None:
    """A job's `errors` (`[{"message", "count"}]`) as words, clipped."""
    if type(value) is not list or not value:
        return None
    said = []
    for item in value[:20]:
        message = item.get("message") if type(item) is dict else item
        said.append(message if isinstance(message, str) else text_of(message))
    return clip("; ".join(said), 500)


def ended_word(outcome: Outcome | None) -> str:
    """The `status` of an ended job whose unrun requests end `outcome` (None: all ran)."""
    if outcome is None:
        return "SUCCESS"
    return next(w for w, (o, _, _) in LEFT.items() if o == outcome and w != "SUCCESS")


def job_object(
    job_id: str,
    word: str,
    *,
    model: str,
    input_files: list[str],
    metadata: dict[str, str],
    created_at: float,
    timeout_hours: int,
    total: int,
    succeeded: int = 0,
    failed: int = 0,
    output_file: str | None = None,
    error_file: str | None = None,
) -> dict[str, Any]:
    """A batch job as Mistral answers it (the inverse of `read_status`)."""
    if word not in STATES:
        raise ValueError(f"not a job status: {word!r}")
    return {
        "id": job_id,
        "object": "batch",
        "input_files": input_files,
        "metadata": metadata,
        "endpoint": ENDPOINT,
        "model": model,
        "output_file": output_file,
        "error_file": error_file,
        "errors": [],
        "status": word,
        "created_at": int(created_at),
        "timeout_hours": timeout_hours,
        "total_requests": total,
        "completed_requests": succeeded + failed,
        "succeeded_requests": succeeded,
        "failed_requests": failed,
        "started_at": int(created_at),
        "completed_at": None,
    }


def file_object(file_id: str, name: str, size: int, created_at: float) -> dict[str, Any]:
    """An uploaded file as the files API answers it."""
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(created_at),
        "filename": name,
        "purpose": "batch",
        "sample_type": "batch_request",
        "source": "upload",
    }


# --- result lines --------------------------------------------------------------------------


def _errored(custom_id: str, status: int | None, error: Any) -> RawResult:
    vendor_type, words = vendor_error_fields(error)
    if status is not None:
        found = error_from_status(status, words, vendor_type=vendor_type)
    else:
        found = error_from_vendor(vendor_type, words)
    return RawResult(
        custom_id, "errored", kind=found.kind, message=clip(found.message), status=status
    )


def read_result(n: int, value: Any, text: str) -> RawResult | None:
    """Result line `n` (parsed `value`, raw `text`); None when it names no custom id."""
    if not is_json(value) or type(value) is not dict:
        found = salvage_id(text)
        return None if found is None else protocol_result(found, n, "not a JSON object")
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return None
    response = value.get("response")
    error = value.get("error")
    if type(response) is dict:
        code = response.get("status_code")
        status = code if type(code) is int and 100 <= code <= 599 else None
        body = response.get("body")
        if status == _SUCCESS and error is None:
            if type(body) is not dict:
                return protocol_result(custom_id, n, f"`response.body` is {text_of(body)}")
            return RawResult(custom_id, "succeeded", body=body)
        if status is not None:
            return _errored(custom_id, status, body if body is not None else error)
    if error is not None:
        return _errored(custom_id, None, error)
    return protocol_result(custom_id, n, f"no response and no error: {text_of(value)}")


def result_line(
    line_id: str,
    custom_id: str,
    *,
    body: dict[str, Any] | None = None,
    status: int = _SUCCESS,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result line as Mistral writes it (the inverse of `read_result`): `body` the whole
    answer (status 200), or an error's `status` and body (`error`)."""
    if error is not None:
        inner = error.get("error", error)
        return {
            "id": line_id,
            "custom_id": custom_id,
            "response": {"status_code": status, "body": error},
            "error": inner,
        }
    return {
        "id": line_id,
        "custom_id": custom_id,
        "response": {"status_code": _SUCCESS, "body": body},
        "error": None,
    }


# --- the calls -----------------------------------------------------------------------------


def _job_url(session: BatchSession, job_id: str, tail: str = "") -> str:
    return session.url(f"{JOBS}/{quote(job_id, safe='')}{tail}")


def _file_url(session: BatchSession, file_id: str, tail: str = "") -> str:
    return session.url(f"{FILES}/{quote(file_id, safe='')}{tail}")


def _recorded_files(session: BatchSession) -> list[str]:
    kept = session.recorded.get("input_files")
    return [f for f in kept if _id(f)] if isinstance(kept, list) else []


async def submit(session: BatchSession, part: BatchPart) -> str:
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in part.lines).encode()
    uploaded = await session.send(
        "POST",
        session.url(FILES),
        files={"file": (f"{part.tag}.jsonl", data, "application/jsonl")},
        data={"purpose": "batch"},
    )
    file_id = _id(json_object(uploaded, "upload batch file").get("id"))
    if file_id is None:
        raise BatchHTTPError("protocol", uploaded.status_code, "upload batch file: no id")
    session.record(input_files=[*_recorded_files(session), file_id])
    job = {
        "input_files": [file_id],
        "endpoint": ENDPOINT,
        "model": part.model.id,
        "metadata": {TAG_KEY: part.tag},
        "timeout_hours": session.settings.window_hours or int(BATCH.window_hours),
    }
    created = await session.send("POST", session.url(JOBS), json=job)
    return read_status(json_object(created, "create batch job")).id


async def status(session: BatchSession, job_id: str) -> BatchStatus:
    response = await session.send("GET", _job_url(session, job_id))
    return read_status(json_object(response, f"batch job {job_id}"))


async def _file(session: BatchSession, file_id: str) -> bytes:
    response = await session.send("GET", _file_url(session, file_id, "/content"))
    return response.content


async def _unrun(session: BatchSession, job: BatchStatus, seen: set[str]) -> list[str]:
    """The custom ids of the job's input file(s) that had no result line, in order."""
    missing: list[str] = []
    for file_id in job.where.get("input_files") or ():
        for _, value, _ in jsonl(await _file(session, file_id)):
            custom_id = value.get("custom_id") if type(value) is dict else None
            if isinstance(custom_id, str) and custom_id and custom_id not in seen:
                seen.add(custom_id)
                missing.append(custom_id)
    return missing


async def results(session: BatchSession, job: BatchStatus) -> AsyncIterator[RawResult]:
    unreadable = Unreadable(f"batch job {job.id}")
    seen: set[str] = set()
    for key in ("output_file", "error_file"):
        file_id = job.where.get(key)
        if not isinstance(file_id, str):
            continue
        for result in unreadable.read(await _file(session, file_id), read_result):
            if result.custom_id not in seen:
                seen.add(result.custom_id)
                yield result
    if job.state == "ended" and (len(seen) < job.counts.total or unreadable.lines):
        outcome, kind, words = LEFT.get(job.vendor_state, LEFT["SUCCESS"])
        if outcome == "errored" and job.error and kind == "server":
            words = f"{words}: {job.error}"
        elif outcome == "errored" and unreadable.lines:
            words = f"{words} ({unreadable.words()})"
        for custom_id in await _unrun(session, job, seen):
            yield RawResult(custom_id, outcome, kind=kind, message=words)
    unreadable.report()


async def cancel(session: BatchSession, job_id: str) -> None:
    await session.send("POST", _job_url(session, job_id, "/cancel"))


async def _jobs(
    session: BatchSession, created_after: float | None = None
) -> AsyncGenerator[BatchStatus, None]:
    for page in range(_MAX_PAGES):
        params = {"page": str(page), "page_size": str(_PAGE), "order_by": "-created"}
        if created_after is not None:
            params["created_after"] = rfc3339(max(created_after, 0.0))
        response = await session.send("GET", session.url(JOBS), params=params)
        said = json_object(response, "list batch jobs")
        items = said.get("data")
        items = items if type(items) is list else []
        for item in items:
            try:
                yield read_status(item)
            except BatchHTTPError:
                continue  # an entry with no id is no job of ours
        total = said.get("total")
        if len(items) < _PAGE or (type(total) is int and (page + 1) * _PAGE >= total):
            return


def listing(session: BatchSession) -> AsyncIterator[BatchStatus]:
    return _jobs(session)


async def find(session: BatchSession, part: BatchPart, since: float) -> list[str]:
    """Jobs created since `since` (the engine's time, less its allowance for clock skew)
    whose metadata holds the part's tag."""
    found: list[str] = []
    async with contextlib.aclosing(_jobs(session, since)) as jobs:
        async for job in jobs:
            if job.created_at is not None and job.created_at < since:
                break  # newest first: the rest are older
            if job.tag == part.tag:
                found.append(job.id)
    return found


async def cleanup(session: BatchSession, job: BatchStatus | None) -> None:
    """Delete the input file(s) the part uploaded and the job's result files."""
    if not session.settings.delete_files:
        return
    files = _recorded_files(session)
    if job is not None:
        files += [f for f in job.where.get("input_files") or () if f not in files]
        if job.state in ("ended", "failed"):
            files += [job.where[k] for k in ("output_file", "error_file") if job.where.get(k)]
    elif not files:
        return
    for file_id in files:
        await session.send("DELETE", _file_url(session, file_id), ok=(200, 204, 404))


def answer_body(message: AssistantMessage, model: Model) -> dict[str, Any]:
    """The `chat.completion` a succeeded result line carries for `message`, its
    `finish_reason` in Mistral's words."""
    body = message_body(message, model.id)
    said = finish_reason(message, WIRE.stop_reasons, API)
    choices = body.get("choices")
    if said is not None and type(choices) is list and choices:
        choices[0]["finish_reason"] = said
    return body


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
    max_bytes=512 * 1000 * 1000,
    one_model=True,
    window_hours=24.0,
    custom_id_pattern=r"^[A-Za-z0-9_-]{1,64}$",
    answer_body=answer_body,
)
