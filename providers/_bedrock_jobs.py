"""Amazon Bedrock batch inference's own shapes, both ways: job states and errors, record
ids and job names, the job object (`GetModelInvocationJob`, a listing's summaries), the
output lines and the manifest. Read by the codec (`_bedrock_batch.py`) and written by the
fake vendor (`stream_core/testing/_batch_routes_bedrock.py`): each word said once.

Sources: the Bedrock API reference (`CreateModelInvocationJob`, `GetModelInvocationJob`,
`ListModelInvocationJobs`, `StopModelInvocationJob`: names, patterns, status words) and the
user guide's batch pages (records `{"recordId", "modelInput"}`, output lines with
`modelOutput` or `error: {errorCode, errorMessage}`, `manifest.json.out`, the quotas).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from stream_core import ErrorKind
from stream_core.provider import (
    BatchCounts,
    BatchHTTPError,
    BatchState,
    BatchStatus,
    Outcome,
    RawResult,
    error_from_vendor,
)

from . import _s3
from ._batch_lines import clip, count, is_json, protocol_result, rfc3339, unix_time

__all__ = [
    "COMPLETED",
    "CONFLICT",
    "CONTROL_ERRORS",
    "DEFAULT_WINDOW",
    "ERROR_TYPE_HEADER",
    "EXPIRED",
    "FAILED",
    "INPUT_FORMAT",
    "INVOCATION_TYPE",
    "IN_PROGRESS",
    "JOB",
    "JOBS",
    "LEFT",
    "MANIFEST",
    "MAX_BYTES",
    "MAX_RECORDS",
    "MIN_RECORDS",
    "NOT_FOUND",
    "OUTPUT_SUFFIX",
    "PARTIAL",
    "QUOTA",
    "STATES",
    "STOPPED",
    "STOPPING",
    "VALIDATION",
    "WINDOW_HOURS",
    "custom_id_of",
    "job_id",
    "job_name",
    "job_object",
    "manifest",
    "output_line",
    "read_line",
    "read_status",
    "record_id",
]

JOB = "/model-invocation-job"
JOBS = "/model-invocation-jobs"
INVOCATION_TYPE = "Converse"
INPUT_FORMAT = "JSONL"
OUTPUT_SUFFIX = ".out"
MANIFEST = "manifest.json.out"
MIN_RECORDS = 100
MAX_RECORDS = 50_000
MAX_BYTES = 1_000_000_000
"""Bedrock's batch quotas (defaults): records a job and a file, and one input file's size."""
WINDOW_HOURS = (24, 168)
DEFAULT_WINDOW = 72

SUBMITTED, VALIDATING, SCHEDULED = "Submitted", "Validating", "Scheduled"
IN_PROGRESS, STOPPING = "InProgress", "Stopping"
COMPLETED, PARTIAL, STOPPED, EXPIRED, FAILED = (
    "Completed", "PartiallyCompleted", "Stopped", "Expired", "Failed",
)  # fmt: skip
STATES: dict[str, BatchState] = {
    SUBMITTED: "submitted",
    VALIDATING: "submitted",
    SCHEDULED: "submitted",
    IN_PROGRESS: "running",
    STOPPING: "cancelling",
    COMPLETED: "ended",
    PARTIAL: "ended",
    STOPPED: "ended",
    EXPIRED: "ended",
    FAILED: "failed",
}
"""A job's `status` -> our state (a word not here: `running`, polled again)."""

LEFT: dict[str, tuple[Outcome, str]] = {
    STOPPED: ("cancelled", "the job was stopped before this record ran"),
    STOPPING: ("cancelled", "the job was stopped before this record ran"),
    EXPIRED: ("expired", "the job timed out before it began; resubmit the record"),
    PARTIAL: ("expired", "the job timed out before this record ran; resubmit it"),
}
"""A job's end -> what became of a record it wrote no line for (else: `errored`)."""

VALIDATION, CONFLICT, QUOTA = (
    "ValidationException", "ConflictException", "ServiceQuotaExceededException",
)  # fmt: skip
NOT_FOUND = "ResourceNotFoundException"
CONTROL_ERRORS: dict[str, tuple[int, ErrorKind]] = {
    VALIDATION: (400, "invalid_request"),
    CONFLICT: (400, "invalid_request"),
    QUOTA: (400, "rate_limit"),
    "ThrottlingException": (429, "rate_limit"),
    "AccessDeniedException": (403, "auth"),
    NOT_FOUND: (404, "not_found"),
    "InternalServerException": (500, "server"),
}
"""The control plane's errors (`x-amzn-ErrorType`): status and our kind. A full queue is
`ServiceQuotaExceededException`, a 400 that is read as `rate_limit`."""
ERROR_TYPE_HEADER = "x-amzn-errortype"

_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.-]{0,62}$")
_JOB_ID = re.compile(r"(?:^|/)([a-z0-9]{12})$")
_RECORD_IN_TEXT = re.compile(r'"recordId"\s*:\s*"([A-Za-z0-9]{1,300})"')


# --- ids and names -------------------------------------------------------------------------

_ESCAPES = {"Z": "ZZ", "_": "Zu", "-": "Zd"}
_UNESCAPES = {"Z": "Z", "u": "_", "d": "-"}


def record_id(custom_id: str) -> str:
    """The record id of a vendor-side id (`[A-Za-z0-9_-]`): alphanumeric, reversibly."""
    out = []
    for ch in custom_id:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            raise ValueError(f"custom id {custom_id!r}: only A-Z, a-z, 0-9, '_' and '-'")
    return "".join(out)


def custom_id_of(record: object) -> str | None:
    """The vendor-side id a record id stands for; None for one `record_id` cannot give."""
    if not isinstance(record, str) or not record or len(record) > 300:
        return None
    out = []
    chars = iter(record)
    for ch in chars:
        if ch == "Z":
            said = _UNESCAPES.get(next(chars, ""))
            if said is None:
                return None
            out.append(said)
        elif ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            return None
    return "".join(out)


def job_name(tag: str) -> str:
    """The job's name for a part's tag (Bedrock's pattern: alphanumerics, `+ - .`)."""
    name = re.sub(r"[^A-Za-z0-9+.-]", "-", tag).lstrip("+.-")[:63]
    return name if _JOB_NAME.match(name) else "sc" + hashlib.sha256(tag.encode()).hexdigest()[:20]


def job_id(job: str) -> str:
    """The 12-character id at the end of a job's ARN (or the id itself); "" for no job."""
    found = _JOB_ID.search(job)
    return found.group(1) if found else ""


# --- status --------------------------------------------------------------------------------


def _uri_of(config: object, member: str) -> str | None:
    inner = config.get(member) if type(config) is dict else None
    found = inner.get("s3Uri") if type(inner) is dict else None
    return found if isinstance(found, str) and _s3.parse_uri(found) is not None else None


def read_status(data: Any, asked: str = "") -> BatchStatus:
    """A job (`GetModelInvocationJob`, or a summary of a listing), read; `BatchHTTPError`
    kind `protocol` when it names no job."""
    obj: dict[str, Any] = data if type(data) is dict else {}
    arn = obj.get("jobArn")
    if not isinstance(arn, str) or not arn or len(arn) > 1011:
        if not asked:
            raise BatchHTTPError("protocol", 200, "a model invocation job with no jobArn")
        arn = asked
    word = obj.get("status")
    said = clip(word, 100) if isinstance(word, str) else ""
    state = STATES.get(said, "running")
    succeeded, errored = count(obj.get("successRecordCount")), count(obj.get("errorRecordCount"))
    total = max(count(obj.get("totalRecordCount")), succeeded + errored)
    left = total - succeeded - errored if state == "ended" else 0
    outcome = LEFT.get(said, ("errored", ""))[0]
    counts = BatchCounts(
        total=total,
        succeeded=succeeded,
        errored=errored + (left if outcome == "errored" else 0),
        expired=left if outcome == "expired" else 0,
        cancelled=left if outcome == "cancelled" else 0,
    )
    where: dict[str, str] = {"job_id": job_id(arn)}
    output = _uri_of(obj.get("outputDataConfig"), "s3OutputDataConfig")
    source = _uri_of(obj.get("inputDataConfig"), "s3InputDataConfig")
    if output is not None:
        where["output_uri"] = output
    if source is not None:
        where["input_uri"] = source
    message, name, model = obj.get("message"), obj.get("jobName"), obj.get("modelId")
    return BatchStatus(
        id=arn,
        state=state,
        vendor_state=said,
        counts=counts,
        created_at=unix_time(obj.get("submitTime")),
        expires_at=unix_time(obj.get("jobExpirationTime")),
        tag=clip(name, 100) if isinstance(name, str) else None,
        where=where,
        error=clip(message, 1000) if state == "failed" and isinstance(message, str) else None,
        model=clip(model, 300) if isinstance(model, str) else None,
    )


def job_object(
    arn: str,
    word: str,
    *,
    name: str,
    model: str,
    role: str,
    token: str | None,
    input_uri: str,
    output_uri: str,
    submitted: float,
    expires: float,
    hours: int,
    total: int = 0,
    succeeded: int = 0,
    errored: int = 0,
    ended: float | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """A job as `GetModelInvocationJob` (and a listing's summaries) describe it."""
    job: dict[str, Any] = {
        "jobArn": arn,
        "jobName": name,
        "modelId": model,
        "roleArn": role,
        "status": word,
        "submitTime": rfc3339(submitted),
        "lastModifiedTime": rfc3339(ended or submitted),
        "inputDataConfig": {
            "s3InputDataConfig": {"s3Uri": input_uri, "s3InputFormat": INPUT_FORMAT}
        },
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": output_uri}},
        "timeoutDurationInHours": hours,
        "jobExpirationTime": rfc3339(expires),
        "modelInvocationType": INVOCATION_TYPE,
        "totalRecordCount": total,
        "processedRecordCount": succeeded + errored,
        "successRecordCount": succeeded,
        "errorRecordCount": errored,
    }
    if token:
        job["clientRequestToken"] = token
    if ended is not None:
        job["endTime"] = rfc3339(ended)
    if message:
        job["message"] = message
    return job


# --- results -------------------------------------------------------------------------------


def output_line(
    record: str, model_input: Any, *, output: Any = None, error: tuple[int, str] | None = None
) -> dict[str, Any]:
    """One record's output line: its answer (`modelOutput`) or its error."""
    out: dict[str, Any] = {"recordId": record, "modelInput": model_input}
    if error is not None:
        out["error"] = {"errorCode": error[0], "errorMessage": error[1]}
    else:
        out["modelOutput"] = output
    return out


def manifest(total: int, succeeded: int, errored: int, tokens: tuple[int, int]) -> dict[str, int]:
    """`manifest.json.out`: the job's counts."""
    return {
        "totalRecordCount": total,
        "processedRecordCount": succeeded + errored,
        "successRecordCount": succeeded,
        "errorRecordCount": errored,
        "inputTokenCount": tokens[0],
        "outputTokenCount": tokens[1],
    }


def read_line(value: Any, text: str, n: int) -> RawResult | None:
    """One output line, read (never raises); None when it names no record at all."""
    record = value.get("recordId") if type(value) is dict else None
    if not isinstance(record, str) or not record:
        found = _RECORD_IN_TEXT.search(text)
        if found is None:
            return None
        cid = custom_id_of(found.group(1)) or found.group(1)
        why = "not JSON" if not is_json(value) else "not an output line"
        return protocol_result(cid, n, f"{why}: {clip(text, 200)!r}")
    cid = custom_id_of(record) or clip(record, 300)
    assert type(value) is dict
    if "modelOutput" in value:
        output = value["modelOutput"]
        if type(output) is not dict:
            return protocol_result(cid, n, f"modelOutput is not an object: {clip(text, 200)!r}")
        return RawResult(cid, "succeeded", body=output)
    error = value.get("error")
    if type(error) is dict:
        words = error.get("errorMessage")
        said = clip(words if isinstance(words, str) else json.dumps(words)[:500])
        code = error.get("errorCode")
        said_status = code if isinstance(code, int | str) else None
        found_error = error_from_vendor(None, said or "the record failed", status=said_status)
        return RawResult(
            cid, "errored", kind=found_error.kind or "server", message=said or "error",
            status=found_error.status_code,
        )  # fmt: skip
    if isinstance(error, str):
        return RawResult(cid, "errored", kind="server", message=clip(error))
    return protocol_result(cid, n, "neither modelOutput nor an error object")
