"""Amazon Bedrock batch inference (`CreateModelInvocationJob`, S3 input and output): the
batch codec.

A job of type `Converse` (`modelInvocationType`) reads JSONL records `{"recordId",
"modelInput"}` from S3, `modelInput` being exactly the `Converse` body `stream()` sends
(the model and the streaming are in its URL, not its body), and writes, under
`{output s3Uri}/{job id}/`, a `<input file>.out` of lines `{"recordId", "modelInput",
"modelOutput": <Converse answer>}` or `{..., "error": {"errorCode", "errorMessage"}}` and
a `manifest.json.out` with the counts. Records the job did not run (it was stopped, it
timed out) have no line: they come back `cancelled` or `expired`, read from the input.

Where things go: the control plane is `bedrock.<region>` beside the model's
`bedrock-runtime.<region>` (FIPS and China kept; `BatchSettings.control_url` overrides; a
base URL of another host, a proxy or a fake, is used as it is). Objects go to
`BatchSettings.bucket` (required) under `BatchSettings.prefix`, at
`BatchSettings.storage_url` (else `AWS_ENDPOINT_URL_S3`, else
`https://s3.<region>.amazonaws.com`), path-style, signed with the same AWS credentials as
the model (a Bedrock API key alone cannot reach S3). The job runs as
`BatchSettings.role_arn` (required), for `BatchSettings.window_hours` (24 to 168; 72 when
unset). A part's objects: `<prefix>/<job name>/input.jsonl` and `<prefix>/<job
name>/out/<job id>/...`, all deleted once collected (`BatchSettings.delete_files`).

The job's name is the part's tag, so `find` lists jobs by name after a crash; its
`clientRequestToken` is derived from the tag, so a create sent twice makes one job. Record
ids are the engine's ids with `_` and `-` escaped (`record_id`): AWS documents record ids
as alphanumeric. Bedrock takes at least `MIN_RECORDS` records a job (its quota "Minimum
number of records per batch inference job"); fewer are refused at submission.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from stream_core import Model, StreamOptions
from stream_core.provider import (
    BatchHTTPError,
    BatchPart,
    BatchSession,
    BatchStatus,
    BatchWire,
    RawResult,
    WireRequest,
)

from . import _aws, _s3
from ._batch_lines import clip, json_object, jsonl, rfc3339
from ._bedrock_endpoint import _ENDPOINT
from ._bedrock_endpoint import endpoint as runtime_endpoint
from ._bedrock_endpoint import profile as call_profile
from ._bedrock_endpoint import region as call_region
from ._bedrock_jobs import (
    COMPLETED,
    CONTROL_ERRORS,
    DEFAULT_WINDOW,
    ERROR_TYPE_HEADER,
    INPUT_FORMAT,
    INVOCATION_TYPE,
    JOB,
    JOBS,
    LEFT,
    MANIFEST,
    MAX_BYTES,
    MAX_RECORDS,
    MIN_RECORDS,
    OUTPUT_SUFFIX,
    WINDOW_HOURS,
    custom_id_of,
    job_id,
    job_name,
    read_line,
    read_status,
    record_id,
)
from ._bedrock_whole import answer_body

__all__ = ["BATCH", "NAME", "cancel", "find", "line", "results", "status", "submit"]

logger = logging.getLogger("stream_core")

NAME = "bedrock-batch-inference"
INPUT_NAME = "input.jsonl"
_ROLE = re.compile(r"^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$")
_PAGE = 100
_MAX_PAGES = 1000


def _token(tag: str, key: str) -> str:
    return hashlib.sha256(f"{tag}|{key}".encode()).hexdigest()[:48]


def line(custom_id: str, request: WireRequest, model: Model) -> dict[str, Any]:
    """One record: the planned `Converse` body (nothing in it is streaming-only)."""
    return {"recordId": record_id(custom_id), "modelInput": request.payload}


# --- settings, endpoints, storage ----------------------------------------------------------


def _options(session: BatchSession) -> StreamOptions:
    options = getattr(session, "options", None)
    return options if isinstance(options, StreamOptions) else StreamOptions()


def _control(session: BatchSession, planned: str | None = None) -> tuple[str, str]:
    """(the control plane's base URL, the region) for the session's model."""
    said, where = session.recorded.get("control_url"), session.recorded.get("region")
    if planned is None and isinstance(said, str) and isinstance(where, str):
        return said, where
    options = _options(session)
    model = session.model
    if options.base_url:
        model = model.model_copy(update={"base_url": options.base_url})
    planned = planned or runtime_endpoint(model, options)
    url = httpx.URL(planned)
    match = _ENDPOINT.match(url.host)
    if match:
        fips, region, cn = match.group(1) or "", match.group(2), match.group(3) or ""
        base = f"https://bedrock{fips}.{region}.amazonaws.com{cn}"
    else:
        at = planned.rfind("/model/")
        base = (planned[:at] if at >= 0 else planned).rstrip("/")
        region = call_region(model, options)
    if session.settings.control_url:
        base = session.settings.control_url.rstrip("/")
    return base, region


def _prefix(value: object) -> str:
    prefix = value.strip("/") if isinstance(value, str) else None
    if prefix is None or len(prefix) > 512 or "//" in prefix:
        raise ValueError(f"BatchSettings.prefix: {str(value)[:80]!r} is not a key prefix")
    if prefix and not _s3.KEY_CHARS.match(prefix):
        raise ValueError(
            f"BatchSettings.prefix: {prefix[:80]!r}: Bedrock takes S3 keys of A-Z, a-z, 0-9 "
            "and ! _ . * ' ( ) - / only"
        )
    return prefix


def _window(hours: object) -> int:
    if hours is None:
        return DEFAULT_WINDOW
    low, high = WINDOW_HOURS
    if type(hours) is not int or not low <= hours <= high:
        raise ValueError(
            f"BatchSettings.window_hours: Bedrock's job timeout is {low} to {high} hours, "
            f"not {hours!r}"
        )
    return hours


def _storage(session: BatchSession, region: str) -> _s3.S3:
    """The part's object store: what submission recorded, else the settings."""
    recorded = session.recorded
    settings = session.settings
    bucket = recorded.get("bucket") or settings.bucket
    if not isinstance(bucket, str) or not _s3.BUCKET.match(bucket):
        raise ValueError(
            f"BatchSettings.bucket: Bedrock batch inference reads and writes S3: name the "
            f"bucket (got {bucket!r})"
        )
    base = recorded.get("storage_url") or settings.storage_url
    base = base or os.environ.get("AWS_ENDPOINT_URL_S3", "").strip()
    if not base:
        suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
        base = f"https://s3.{region}{suffix}"
    if not isinstance(base, str) or not base.startswith(("https://", "http://")):
        raise ValueError(f"BatchSettings.storage_url: {str(base)[:80]!r} is not an http(s) URL")
    found = _aws.find_credentials(call_profile(_options(session)))
    if found is None:
        raise BatchHTTPError(
            "auth", None,
            "Bedrock batch inference reads and writes S3, which takes AWS credentials "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile): a Bedrock API key "
            "is not enough",
        )  # fmt: skip
    return _s3.S3(base.rstrip("/"), bucket, region, found)


def _job_url(control: str, job: str, tail: str = "") -> str:
    return f"{control}{JOB}/{quote(job, safe='')}{tail}"


# --- submission ----------------------------------------------------------------------------


def _refusal(response: httpx.Response, what: str) -> BatchHTTPError:
    """A control-plane error answer (the session's kind by status, but a full queue)."""
    word = response.headers.get(ERROR_TYPE_HEADER, "").split(":", 1)[0].strip()
    try:
        body = json.loads(response.content)
    except (ValueError, RecursionError):
        body = None
    said = (body.get("message") or body.get("Message")) if type(body) is dict else None
    if not word and type(body) is dict:
        kind_word = body.get("__type") or body.get("code")
        word = kind_word.rsplit("#", 1)[-1] if isinstance(kind_word, str) else ""
    words = said if isinstance(said, str) else response.text[:300]
    kind = CONTROL_ERRORS.get(word, (response.status_code, "invalid_request"))[1]
    text = clip(f"{what}: {response.status_code} {word or 'error'}: {words}", 1000)
    return BatchHTTPError(kind, response.status_code, text)


async def submit(session: BatchSession, part: BatchPart) -> str:
    settings = session.settings
    role = settings.role_arn
    if not isinstance(role, str) or not _ROLE.match(role):
        raise ValueError(
            "BatchSettings.role_arn: Bedrock runs a batch job as an IAM service role that "
            "reads and writes the bucket; set role_arn='arn:aws:iam::<account>:role/<name>' "
            f"(got {str(role)[:80]!r})"
        )
    hours = _window(settings.window_hours)
    prefix = _prefix(settings.prefix)
    control, region = _control(session, part.endpoint or None)
    s3 = _storage(session, region)
    name = job_name(part.tag)
    base = f"{prefix}/{name}" if prefix else name
    input_key = f"{base}/{INPUT_NAME}"
    body = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in part.lines).encode()
    session.record(
        control_url=control, region=region, storage_url=s3.base, bucket=s3.bucket,
        key_base=base, input_key=input_key, output_prefix=f"{base}/out/", job_name=name,
    )  # fmt: skip
    await _s3.put_object(session, s3, input_key, body)
    payload = {
        "jobName": name,
        "roleArn": role,
        "clientRequestToken": _token(part.tag, input_key),
        "modelId": part.model.id,
        "modelInvocationType": INVOCATION_TYPE,
        "inputDataConfig": {
            "s3InputDataConfig": {
                "s3Uri": _s3.uri(s3.bucket, input_key),
                "s3InputFormat": INPUT_FORMAT,
            }
        },
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": _s3.uri(s3.bucket, f"{base}/out/")}},
        "timeoutDurationInHours": hours,
    }
    response = await session.send("POST", f"{control}{JOB}", json=payload, ok=(200, 201, 400))
    if response.status_code == 400:
        raise _refusal(response, f"POST {JOB}")
    data = json_object(response, "CreateModelInvocationJob")
    arn = data.get("jobArn")
    if not isinstance(arn, str) or not arn or len(arn) > 1011:
        raise BatchHTTPError(
            "protocol", response.status_code, "CreateModelInvocationJob: no jobArn"
        )
    return arn


# --- status ---------------------------------------------------------------------------------


async def status(session: BatchSession, batch_id: str) -> BatchStatus:
    control, _ = _control(session)
    response = await session.send("GET", _job_url(control, batch_id))
    return read_status(json_object(response, "GetModelInvocationJob"), batch_id)


# --- results --------------------------------------------------------------------------------


def _output_folder(session: BatchSession, s: BatchStatus) -> tuple[str, str] | None:
    """(bucket, key prefix) of the job's output files."""
    job = s.where.get("job_id") or job_id(s.id)
    if not job:
        return None
    prefix = session.recorded.get("output_prefix")
    bucket = session.recorded.get("bucket")
    if not isinstance(prefix, str) or not isinstance(bucket, str):
        found = _s3.parse_uri(s.where.get("output_uri"))
        if found is None:
            return None
        bucket, prefix = found
    prefix = prefix.rstrip("/")
    return bucket, f"{prefix}/{job}/" if prefix else f"{job}/"


async def results(session: BatchSession, s: BatchStatus) -> AsyncIterator[RawResult]:
    """Each output line's result, then each record the job wrote no line for (its input
    read back): `cancelled` or `expired` by how the job ended, else `errored`."""
    _, region = _control(session)
    store = _storage(session, region)
    folder = _output_folder(session, s)
    seen: set[str] = set()
    unread = 0
    if folder is not None and folder[0] == store.bucket:
        keys = await _s3.list_keys(session, store, folder[1])
        outputs = sorted(k for k in keys if k.endswith(OUTPUT_SUFFIX) and k != MANIFEST)
        for key in [k for k in outputs if not k.endswith("/" + MANIFEST)]:
            body = await _s3.get_object(session, store, key)
            for n, value, text in jsonl(body or b""):
                result = read_line(value, text, n)
                if result is None:
                    unread += 1
                elif result.custom_id not in seen:
                    seen.add(result.custom_id)
                    yield result
    if unread:
        logger.warning("Bedrock batch job %s: %d output line(s) name no record", s.id, unread)
    if s.vendor_state == COMPLETED and not unread and len(seen) >= s.counts.total > 0:
        return
    async for result in _left(session, store, s, seen, unread):
        yield result


async def _left(
    session: BatchSession, store: _s3.S3, s: BatchStatus, seen: set[str], unread: int
) -> AsyncIterator[RawResult]:
    key = session.recorded.get("input_key")
    if not isinstance(key, str):
        found = _s3.parse_uri(s.where.get("input_uri"))
        if found is None or found[0] != store.bucket:
            return
        key = found[1]
    body = await _s3.get_object(session, store, key)
    outcome, words = LEFT.get(s.vendor_state, ("errored", ""))
    if outcome == "errored":
        words = f"Bedrock wrote no result line for this record (job {s.vendor_state or '?'})"
        if unread:
            words += f"; {unread} output line(s) could not be read"
    for _, value, _ in jsonl(body or b""):
        record = value.get("recordId") if type(value) is dict else None
        cid = custom_id_of(record) or (record if isinstance(record, str) else None)
        if cid is None or cid in seen:
            continue
        seen.add(cid)
        if outcome == "errored":
            yield RawResult(cid, "errored", kind="protocol", message=words)
        else:
            yield RawResult(cid, outcome, message=words)


# --- cancel, listing, find, cleanup --------------------------------------------------------


async def cancel(session: BatchSession, batch_id: str) -> None:
    control, _ = _control(session)
    response = await session.send("POST", _job_url(control, batch_id, "/stop"), ok=(200, 400))
    if response.status_code == 400:
        now = await status(session, batch_id)
        if now.state not in ("ended", "failed", "cancelling"):
            raise _refusal(response, "StopModelInvocationJob")


async def _pages(session: BatchSession, params: dict[str, str]) -> AsyncIterator[BatchStatus]:
    control, _ = _control(session)
    token: str | None = None
    for _ in range(_MAX_PAGES):
        asked = dict(params, maxResults=str(_PAGE), sortBy="CreationTime")
        if token is not None:
            asked["nextToken"] = token
        response = await session.send("GET", f"{control}{JOBS}", params=asked)
        data = json_object(response, "ListModelInvocationJobs")
        jobs = data.get("invocationJobSummaries")
        for job in jobs if type(jobs) is list else []:
            if type(job) is dict and isinstance(job.get("jobArn"), str):
                yield read_status(job)
        following = data.get("nextToken")
        if not isinstance(following, str) or not following or following == token:
            return
        token = following


async def listing(session: BatchSession) -> AsyncIterator[BatchStatus]:
    async for found in _pages(session, {"sortOrder": "Descending"}):
        yield found


async def find(session: BatchSession, part: BatchPart, since: float) -> list[str]:
    """The jobs named after the part's tag, submitted since `since`, oldest first."""
    name = job_name(part.tag)
    params = {"nameContains": name, "sortOrder": "Ascending"}
    if since > 0:
        params["submitTimeAfter"] = rfc3339(since)
    return [s.id async for s in _pages(session, params) if s.tag == name]


async def cleanup(session: BatchSession, s: BatchStatus | None) -> None:
    """Delete the part's input and its job's output objects (none gone is an error): all
    under `<prefix>/<job name>/`, as recorded, else as the job's input URI says."""
    base = session.recorded.get("key_base")
    _, region = _control(session)
    store = _storage(session, region)
    if not isinstance(base, str) or not base:
        found = _s3.parse_uri(s.where.get("input_uri")) if s is not None else None
        if found is None or found[0] != store.bucket or not found[1].endswith("/" + INPUT_NAME):
            return
        base = found[1][: -len(INPUT_NAME) - 1]
    for key in await _s3.list_keys(session, store, base + "/"):
        await _s3.delete_object(session, store, key)


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
    max_requests=MAX_RECORDS,
    max_bytes=MAX_BYTES,
    min_requests=MIN_RECORDS,
    one_model=True,
    window_hours=float(DEFAULT_WINDOW),
    answer_body=answer_body,
)
