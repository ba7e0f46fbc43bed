"""OpenAI Batch's words and shapes (`_openai_batch`): its tables (endpoints, statuses,
error codes), the writers of its files and objects (the fake vendor answers with them) and
the readers of a batch object and a result line (untrusted: never raises for a line).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from stream_core import AssistantMessage, Model
from stream_core.provider import (
    BatchCounts,
    BatchHTTPError,
    BatchState,
    BatchStatus,
    RawResult,
    error_from_status,
    error_from_vendor,
    vendor_error_fields,
)

from ._batch_lines import clip, count, is_json, protocol_result, salvage_id, text_of, unix_time
from ._chat_encode import ERRORS, message_body
from ._responses_encode import response_body
from .openai_completions import API as CHAT_API
from .openai_responses import API as RESPONSES_API
from .openai_responses import ERROR_KINDS

__all__ = [
    "CANCELLED",
    "CANCELLED_CODE",
    "CANCELLED_TEXT",
    "CANCELLING",
    "COMPLETED",
    "ENDPOINTS",
    "ERROR_FILE",
    "EXPIRED",
    "EXPIRED_CODE",
    "EXPIRED_TEXT",
    "FAILED",
    "FINALIZING",
    "INPUT_FILE",
    "IN_PROGRESS",
    "LINE_ERROR_CODES",
    "MAX_BYTES",
    "MAX_REQUESTS",
    "OUTPUT_FILE",
    "OUTPUT_PURPOSE",
    "PURPOSE",
    "QUEUE_FULL_CODE",
    "STATES",
    "STREAM_FIELDS",
    "TAG_KEY",
    "VALIDATING",
    "WINDOW_HOURS",
    "answer_body",
    "batch_object",
    "file_object",
    "input_line",
    "list_page",
    "queue_full",
    "read_line",
    "read_status",
    "result_line",
]

ENDPOINTS: dict[str, str] = {
    CHAT_API: "/v1/chat/completions",
    RESPONSES_API: "/v1/responses",
}
"""Wire API -> the batch endpoint its lines name (`url`) and the batch is created for."""

STREAM_FIELDS = frozenset({"stream", "stream_options"})
"""Payload fields only a stream has: removed from a line."""

TAG_KEY = "stream_core_tag"
"""The `metadata` key our part's tag is kept under (`find`)."""

WINDOW_HOURS = 24
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
PURPOSE = "batch"
OUTPUT_PURPOSE = "batch_output"

# The batch statuses, and where each is in our words.
VALIDATING = "validating"
FAILED = "failed"
IN_PROGRESS = "in_progress"
FINALIZING = "finalizing"
COMPLETED = "completed"
EXPIRED = "expired"
CANCELLING = "cancelling"
CANCELLED = "cancelled"
STATES: dict[str, BatchState] = {
    VALIDATING: "submitted",
    FAILED: "failed",
    IN_PROGRESS: "running",
    FINALIZING: "ending",
    COMPLETED: "ended",
    EXPIRED: "ended",
    CANCELLING: "cancelling",
    CANCELLED: "ended",
}
"""OpenAI's batch status -> ours. A word not here is read as `running` (keep polling)."""

OUTPUT_FILE = "output_file_id"
ERROR_FILE = "error_file_id"
INPUT_FILE = "input_file_id"

_EXPIRED_STATUS, _EXPIRED_TYPE, _EXPIRED_CODE = ERRORS["expired"]
EXPIRED_CODE: str = _EXPIRED_CODE or _EXPIRED_TYPE
"""A result line's `error.code` for a request the window ran out on (`batch_expired`)."""
EXPIRED_TEXT = "This request could not be executed before the completion window expired."
CANCELLED_CODE = "batch_cancelled"
"""A result line's `error.code` for a request a cancel stopped before it ran."""
CANCELLED_TEXT = "This request was not executed because the batch was cancelled."
QUEUE_FULL_CODE = "token_limit_exceeded"
"""A failed batch's `errors.data[].code` when the organization's enqueued-token limit for
the model is reached: the batch never ran; submit it again later."""
LINE_ERROR_CODES: dict[str, str] = {
    "json": "invalid_json_line",
    "custom_id": "duplicate_custom_id",
    "url": "invalid_url",
    "model": "mismatched_model",
    "body": "invalid_request",
    "size": "too_many_requests_in_file",
}
"""Validation codes of an input file's faults (`errors.data[].code`, with its `line`), as
the fake vendor says them; read back only as text."""

# --- writers (the lines, and the objects the fake vendor answers with) -------------------


def input_line(custom_id: str, url: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """One request of an input file."""
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": dict(body)}


def result_line(
    custom_id: str,
    *,
    body: Any = None,
    status: int = 200,
    code: str | None = None,
    message: str = "",
) -> dict[str, Any]:
    """One line of an output or error file: a `response` (`status` and `body`, an answer
    or an error body), or with `code` a top-level `error` (`EXPIRED_CODE`,
    `CANCELLED_CODE`) and no response."""
    line: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": custom_id}
    if code is not None:
        line.update(response=None, error={"code": code, "message": message})
        return line
    response = {"status_code": status, "request_id": uuid.uuid4().hex, "body": body}
    line.update(response=response, error=None)
    return line


def file_object(
    id: str, *, filename: str, size: int, created_at: float, purpose: str = PURPOSE
) -> dict[str, Any]:
    """A file as `POST /files` and `GET /files/{id}` answer it."""
    return {
        "id": id,
        "object": "file",
        "bytes": size,
        "created_at": int(created_at),
        "filename": filename,
        "purpose": purpose,
    }


def batch_object(
    id: str,
    *,
    status: str,
    endpoint: str,
    input_file_id: str,
    created_at: float,
    expires_at: float | None,
    counts: tuple[int, int, int] = (0, 0, 0),
    output_file_id: str | None = None,
    error_file_id: str | None = None,
    errors: Sequence[Mapping[str, Any]] = (),
    metadata: Mapping[str, str] | None = None,
    model: str | None = None,
    times: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """A batch as `POST /batches`, `GET /batches/{id}` and the listing answer it: `counts`
    is (total, completed, failed); `errors` the validation errors (`code`, `message`,
    `line`); `times` the `<status>_at` stamps it has (`in_progress`, `completed`, ...)."""
    stamps: dict[str, int | None] = {
        f"{word}_at": None
        for word in (IN_PROGRESS, FINALIZING, COMPLETED, FAILED, EXPIRED, CANCELLING, CANCELLED)
    }
    for word, t in (times or {}).items():
        stamps[f"{word}_at"] = int(t)
    total, completed, failed = counts
    out: dict[str, Any] = {
        "id": id,
        "object": "batch",
        "endpoint": endpoint,
        "model": model,
        "errors": {"object": "list", "data": [dict(e) for e in errors]} if errors else None,
        INPUT_FILE: input_file_id,
        "completion_window": f"{WINDOW_HOURS}h",
        "status": status,
        OUTPUT_FILE: output_file_id,
        ERROR_FILE: error_file_id,
        "created_at": int(created_at),
        "expires_at": None if expires_at is None else int(expires_at),
        **stamps,
        "request_counts": {"total": total, "completed": completed, "failed": failed},
        "metadata": dict(metadata) if metadata is not None else None,
    }
    return out


def list_page(items: Sequence[Mapping[str, Any]], *, has_more: bool) -> dict[str, Any]:
    """One page of `GET /batches` (newest first)."""
    first = items[0]["id"] if items else None
    last = items[-1]["id"] if items else None
    return {
        "object": "list",
        "data": [dict(i) for i in items],
        "first_id": first,
        "last_id": last,
        "has_more": has_more,
    }


def answer_body(message: AssistantMessage, model: Model) -> dict[str, Any]:
    """The whole answer a result line's `response.body` holds for `message`: a
    `chat.completion` (`/v1/chat/completions`) or a `response` object (`/v1/responses`)."""
    if model.api == RESPONSES_API:
        return response_body(message, model.id, None)
    return message_body(message, model.id)


# --- readers ------------------------------------------------------------------------------


def _errors_of(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A batch's validation errors as (code, message), whatever their shape."""
    errors = data.get("errors")
    items = errors.get("data") if type(errors) is dict else errors
    if type(items) is not list:
        return [("", text_of(items))] if items not in (None, {}, [], "") else []
    found: list[tuple[str, str]] = []
    for item in items[:50]:
        if type(item) is dict:
            code = item.get("code")
            said = item.get("message")
            line = item.get("line")
            text = said if type(said) is str else text_of(said)
            if type(line) is int:
                text = f"line {line}: {text}"
            found.append((code if type(code) is str else "", clip(text, 500)))
        else:
            found.append(("", text_of(item)))
    return found


def read_status(data: Any) -> BatchStatus:
    """A batch object read (untrusted: a field of the wrong type is left out);
    `BatchHTTPError` kind `protocol` when it is not a batch at all."""
    if type(data) is not dict or type(data.get("id")) is not str or not data["id"]:
        raise BatchHTTPError("protocol", 200, f"not a batch object: {text_of(data)}")
    word = data.get("status")
    word = word if type(word) is str else ""
    state: BatchState = STATES.get(word, "running")
    raw = data.get("request_counts")
    counts_in = raw if type(raw) is dict else {}
    total = count(counts_in.get("total"))
    completed = count(counts_in.get("completed"))
    failed = count(counts_in.get("failed"))
    rest = max(total - completed - failed, 0)
    counts = BatchCounts(
        total=total,
        succeeded=completed,
        errored=failed,
        expired=rest if word == EXPIRED else 0,
        cancelled=rest if word == CANCELLED else 0,
    )
    metadata = data.get("metadata")
    tag = metadata.get(TAG_KEY) if type(metadata) is dict else None
    where = {
        key: value
        for key in (OUTPUT_FILE, ERROR_FILE, INPUT_FILE)
        if type(value := data.get(key)) is str and value
    }
    errors = _errors_of(data)
    error = None
    if errors:
        error = clip("; ".join(f"{c}: {m}" if c else m for c, m in errors), 1000)
    model = data.get("model")
    return BatchStatus(
        id=data["id"],
        state=state,
        vendor_state=clip(word, 100),
        counts=counts,
        created_at=unix_time(data.get("created_at")),
        expires_at=unix_time(data.get("expires_at")),
        tag=tag if type(tag) is str else None,
        where=where,
        error=error,
        model=model if type(model) is str else None,
    )


def queue_full(status: BatchStatus) -> bool:
    """Whether the batch failed for the organization's enqueued-token limit."""
    return status.state == "failed" and (status.error or "").startswith(QUEUE_FULL_CODE)


def _present(value: Any) -> bool:
    """A field that says something (`null`, `false`, `0`, `""`, `{}` and `[]` say nothing)."""
    return bool(value)


def read_line(n: int, value: Any, text: str) -> RawResult | None:
    """One line of an output or error file read into a result; a line that cannot be read
    is an `errored` result of kind `protocol` (None: it names no custom id)."""
    if not is_json(value) or type(value) is not dict:
        found = salvage_id(text)
        why = "not JSON" if not is_json(value) else f"not an object: {text_of(value)}"
        return None if found is None else protocol_result(found, n, why)
    cid = value.get("custom_id")
    if type(cid) is not str or not cid:
        return None
    try:
        return _read(n, cid, value)
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: a result, never a raise
        return protocol_result(cid, n, f"{type(exc).__name__}: {exc}")


def _read(n: int, cid: str, value: dict[str, Any]) -> RawResult:
    error = value.get("error")
    if _present(error):
        return _line_error(cid, error)
    response = value.get("response")
    if type(response) is not dict:
        return protocol_result(cid, n, f"no response and no error: {text_of(response)}")
    status = response.get("status_code")
    body = response.get("body")
    if type(status) is not int or not 100 <= status <= 599:
        return protocol_result(cid, n, f"response.status_code {text_of(status)}")
    if not 200 <= status <= 299:
        vendor_type, words = vendor_error_fields(body)
        err = error_from_status(status, words, vendor_type=vendor_type)
        return RawResult(cid, "errored", kind=err.kind, message=clip(words), status=status)
    if type(body) is not dict:
        return protocol_result(cid, n, f"response.body is not an object: {text_of(body)}")
    if _present(body.get("error")) and "choices" not in body and "output" not in body:
        # A 200 whose body is an error object, not an answer.
        vendor_type, words = vendor_error_fields(body)
        err = error_from_vendor(vendor_type, words, extra_kinds=ERROR_KINDS)
        return RawResult(cid, "errored", kind=err.kind, message=clip(words), status=status)
    return RawResult(cid, "succeeded", body=body, status=status)


def _line_error(cid: str, error: Any) -> RawResult:
    code = error.get("code") if type(error) is dict else None
    said = error.get("message") if type(error) is dict else None
    message = said if type(said) is str and said.strip() else text_of(error)
    if code == EXPIRED_CODE:
        return RawResult(cid, "expired", kind="expired", message=clip(message))
    if code == CANCELLED_CODE:
        return RawResult(cid, "cancelled", kind="aborted", message=clip(message))
    name = code if type(code) is str and code else None
    said_status = code if type(code) is int else None
    err = error_from_vendor(name, message, status=said_status, extra_kinds=ERROR_KINDS)
    words = f"{name}: {message}" if name else message
    return RawResult(cid, "errored", kind=err.kind, message=clip(words), status=err.status_code)
