"""Vertex AI batch prediction for Gemini models: `POST .../projects/{p}/locations/{l}/
batchPredictionJobs`, its input and output in Cloud Storage (`_gcs`).

A part is one job. Its lines (`{request, key}`: the request as `stream()` sends it, and our
custom id beside it) are uploaded to `gs://{bucket}/{prefix}/{tag}/input.jsonl`
(`BatchSettings.bucket`, required: `ValueError` naming it at submission), the object's
name recorded first; the job writes under `.../{tag}/output/` (`outputInfo.
gcsOutputDirectory` names the folder). The job's `displayName` is our tag: `find` matches it.

The endpoint comes from the model's as `stream()` builds it (`vertex_base_url`: the project
and location filled in), less its `/publishers/google`: a loopback base URL works as well.

States are `JOB_STATE_*`; `completionStats` counts `successfulCount`, `failedCount`,
`incompleteCount` (int64 strings). Each output line (`predictions*.jsonl`) echoes the
request and adds `response` and `status` (empty on success, else the error: text or an
object). Vertex AI's documentation shows only `request` on an input line; a line whose
`key` came back is matched by it, any other by the request it echoes (the input object is
read back for that), and what still matches nothing is kept as a protocol error. A
request no line answers, once the job ended, is a result too: expired or cancelled when
the job ended so, else a protocol error.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from typing import Any

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

from . import _gcs
from ._batch_lines import json_or_none
from ._gemini_whole import answer_body, status_text
from ._google_batch import (
    ENDED_AS,
    STATES,
    Keys,
    clip,
    count,
    counts_of,
    jsonl,
    pack_keys,
    protocol,
    recorded_keys,
    result_of,
    rfc3339,
    state_word,
    timestamp,
)
from ._vertex import vertex_base_url

__all__ = ["BATCH", "STATS", "answer_body", "job_resource", "output_line", "status_text"]

STATS = ("successfulCount", "failedCount", "incompleteCount")
"""`completionStats`' counts: succeeded, failed, not run."""
MAX_PAGES = 50
PAGE_SIZE = "100"
_JOBS = "batchPredictionJobs"
_NAME = re.compile(
    r"projects/[A-Za-z0-9_.-]{1,100}/locations/[A-Za-z0-9_-]{1,60}/batchPredictionJobs/[A-Za-z0-9_-]{1,100}"
)
_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
_LOCATION = re.compile(r"(?P<root>.*)/(?P<path>projects/[^/?#]+/locations/[^/?#]+)")


def line(custom_id: str, request: WireRequest, model: Model) -> dict[str, Any]:
    """`{request, key}`: the request as `stream()` sends it, our custom id beside it."""
    return {"request": request.payload, "key": custom_id}


# --- where things are --------------------------------------------------------------------


def _endpoint(session: BatchSession) -> tuple[str, str]:
    """(API root `https://{location}-aiplatform.googleapis.com/v1`, location path
    `projects/{p}/locations/{l}`) from the model's endpoint."""
    options = getattr(session, "options", None)
    if not isinstance(options, StreamOptions):
        options = StreamOptions()
    base = vertex_base_url(session.model, options).rstrip("/")
    base = re.sub(r"/publishers/[^/]+$", "", base)
    found = _LOCATION.fullmatch(base)
    if found is None:
        raise ValueError(
            "model.base_url: Vertex AI batch prediction needs a project and location in the "
            "endpoint (.../projects/P/locations/L): set GOOGLE_CLOUD_PROJECT or "
            'Model.compat["project"]'
        )
    return found.group("root"), found.group("path")


def _job_url(session: BatchSession, job_id: str, suffix: str = "") -> str:
    """The job's URL: its id at the model's location, or its whole name."""
    root, location = _endpoint(session)
    if _NAME.fullmatch(job_id):
        return f"{root}/{job_id}{suffix}"
    if not _ID.fullmatch(job_id):
        raise BatchHTTPError("invalid_request", None, f"not a batch prediction job: {clip(job_id)}")
    return f"{root}/{location}/{_JOBS}/{job_id}{suffix}"


def _storage(session: BatchSession, tag: str) -> tuple[str, str, str]:
    """(bucket, input object, output prefix) of a part."""
    settings = session.settings
    bucket = _gcs.bucket_name(settings.bucket)
    prefix = settings.prefix.strip("/")
    folder = f"{prefix}/{tag}" if prefix else tag
    return bucket, f"{folder}/input.jsonl", f"{folder}/output"


# --- submission --------------------------------------------------------------------------


async def submit(session: BatchSession, part: BatchPart) -> str:
    bucket, name, output = _storage(session, part.tag)
    root, location = _endpoint(session)
    keys = [str(item["key"]) for item in part.lines]
    session.record(keys=pack_keys(keys), gcs_bucket=bucket, gcs_input=name, gcs_output=output)
    data = "\n".join(json.dumps(item, ensure_ascii=False) for item in part.lines).encode()
    await _gcs.upload(session, bucket, name, data)
    job = {
        "displayName": part.tag,
        "model": f"publishers/google/models/{part.model.id}",
        "inputConfig": {
            "instancesFormat": "jsonl",
            "gcsSource": {"uris": [_gcs.gs_uri(bucket, name)]},
        },
        "outputConfig": {
            "predictionsFormat": "jsonl",
            "gcsDestination": {"outputUriPrefix": _gcs.gs_uri(bucket, output)},
        },
    }
    response = await session.send("POST", f"{root}/{location}/{_JOBS}", json=job)
    found = json_or_none(response)
    read = _status(found) if isinstance(found, dict) else None
    if read is None:
        raise BatchHTTPError("protocol", response.status_code, f"no job name in: {clip(found)}")
    return read.id


# --- status ------------------------------------------------------------------------------


def _status(obj: dict[str, Any]) -> BatchStatus | None:
    name = obj.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return None
    word = obj.get("state")
    word = word if isinstance(word, str) else ""
    state = STATES.get(word, "running")
    stats = obj.get("completionStats")
    stats = stats if isinstance(stats, dict) else {}
    succeeded, failed, incomplete = (count(stats.get(f)) for f in STATS)
    where: dict[str, Any] = {}
    info = obj.get("outputInfo")
    folder = info.get("gcsOutputDirectory") if isinstance(info, dict) else None
    if _gcs.parse_gs(folder) is not None:
        where["output"] = folder
    source = obj.get("inputConfig")
    source = source.get("gcsSource") if isinstance(source, dict) else None
    uris = source.get("uris") if isinstance(source, dict) else None
    if isinstance(uris, list) and len(uris) == 1 and _gcs.parse_gs(uris[0]) is not None:
        where["input"] = uris[0]
    target = obj.get("outputConfig")
    target = target.get("gcsDestination") if isinstance(target, dict) else None
    prefix = target.get("outputUriPrefix") if isinstance(target, dict) else None
    if _gcs.parse_gs(prefix) is not None:
        where["output_prefix"] = prefix
    error = obj.get("error")
    problem = None
    if isinstance(error, dict) and error:
        said = error.get("message")
        problem = clip(said if isinstance(said, str) else error, 1000)
    tag, model = obj.get("displayName"), obj.get("model")
    return BatchStatus(
        id=name.rpartition("/")[2],
        state=state,
        vendor_state=word[:100],
        counts=counts_of(succeeded + failed + incomplete, succeeded, failed, ENDED_AS.get(word)),
        created_at=timestamp(obj.get("createTime")),
        tag=tag if isinstance(tag, str) else None,
        where=where,
        error=problem,
        model=model.rpartition("/")[2] if isinstance(model, str) else None,
    )


async def status(session: BatchSession, job_id: str) -> BatchStatus:
    response = await session.send("GET", _job_url(session, job_id))
    found = json_or_none(response)
    read = _status(found) if isinstance(found, dict) else None
    if read is None:
        raise BatchHTTPError("protocol", response.status_code, f"not a job: {clip(found)}")
    keys = recorded_keys(session)
    if keys is not None and read.counts.total < len(keys):
        c = read.counts  # the part's own count: none of its requests left out of `total`
        counts = counts_of(len(keys), c.succeeded, c.errored, ENDED_AS.get(read.vendor_state))
        read = dataclasses.replace(read, counts=counts)
    return read


# --- results -------------------------------------------------------------------------------


def _bucket(session: BatchSession) -> str | None:
    """The part's bucket: recorded at submission, else the settings' (the only one read)."""
    for found in (session.recorded.get("gcs_bucket"), session.settings.bucket):
        try:
            return _gcs.bucket_name(found)
        except ValueError:
            continue
    return None


def _object(session: BatchSession, recorded: str, said: object) -> tuple[str, str] | None:
    """(bucket, name) of one of the part's objects: recorded, else as the job says it, in
    the part's bucket only."""
    bucket = _bucket(session)
    name = session.recorded.get(recorded)
    if bucket is None:
        return None
    if isinstance(name, str) and name:
        return bucket, name
    found = _gcs.parse_gs(said)
    return found if found is not None and found[0] == bucket and found[1] else None


def _folder(session: BatchSession, job: BatchStatus) -> tuple[str, str] | None:
    """(bucket, prefix) to read results from: the job's output folder when it is under the
    part's own output prefix, else that prefix (no other bucket is ever read)."""
    found = _object(session, "gcs_output", job.where.get("output_prefix"))
    if found is None:
        return None
    bucket, output = found[0], found[1].rstrip("/") + "/"
    said = _gcs.parse_gs(job.where.get("output"))
    if said is not None and said[0] == bucket and said[1].startswith(output):
        return bucket, said[1].rstrip("/") + "/"
    return bucket, output


async def _sent(session: BatchSession, job: BatchStatus) -> list[tuple[str, Any]]:
    """(custom id, request) of each line sent, read back from the input object."""
    found = _object(session, "gcs_input", job.where.get("input"))
    if found is None:
        return []
    try:
        data = await _gcs.download(session, *found)
    except BatchHTTPError:
        return []
    pairs: list[tuple[str, Any]] = []
    for _, item, _ in jsonl(data):
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            pairs.append((item["key"], item.get("request")))
    return pairs


async def results(session: BatchSession, job: BatchStatus) -> AsyncIterator[RawResult]:
    known = recorded_keys(session)
    sent: list[tuple[str, Any]] | None = None
    if known is None and job.state == "ended":
        sent = await _sent(session, job)  # nothing recorded: the input says what was sent
        known = [k for k, _ in sent] or None
    keys = Keys(known)
    folder = _folder(session, job)
    names: list[str] = []
    if folder is not None:
        names = [n async for n in _gcs.listing(session, *folder) if n.endswith(".jsonl")]
    for name in sorted(names):
        assert folder is not None
        data = await _gcs.download(session, folder[0], name)
        for _, item, why in jsonl(data):
            if why is not None:
                yield keys.unread(why, f"a result line of {name}")
                continue
            if not isinstance(item, dict):
                yield keys.unread(json.dumps(item)[:300], "a result line that is not an object")
                continue
            if keys.by_echo is None and not keys.owns(item.get("key")):
                keys.echoes(sent if sent is not None else await _sent(session, job))
            found = _one(keys, item)
            if found is not None:
                yield found
    for missing in keys.missing(job.state, job.vendor_state, ENDED_AS.get(job.vendor_state)):
        yield missing


def _one(keys: Keys, item: dict[str, Any]) -> RawResult | None:
    custom_id = keys.take(item.get("key"), None, item.get("request"))
    if custom_id is None:
        return None
    if custom_id == "":
        return keys.unread(json.dumps(item)[:300], "a result line that matches no request sent")
    error = item.get("status")
    response = item.get("response")
    if error in (None, "", {}) and response is None:
        return protocol(custom_id, f"a result line with no response and no status: {clip(item)}")
    return result_of(custom_id, response, error)


# --- cancel, listing, find, cleanup ------------------------------------------------------


async def cancel(session: BatchSession, job_id: str) -> None:
    try:
        await session.send("POST", _job_url(session, job_id, ":cancel"), json={})
    except BatchHTTPError as exc:
        if exc.status not in (400, 409):
            raise
        now = await status(session, job_id)  # already ended: nothing to cancel
        if now.state not in ("ended", "failed"):
            raise


async def _jobs(session: BatchSession, where: dict[str, str]) -> AsyncIterator[BatchStatus]:
    root, location = _endpoint(session)
    token: str | None = None
    for _ in range(MAX_PAGES):
        params = {"pageSize": PAGE_SIZE, **where}
        if token:
            params["pageToken"] = token
        page = json_or_none(await session.send("GET", f"{root}/{location}/{_JOBS}", params=params))
        if not isinstance(page, dict):
            return
        items = page.get(_JOBS)
        for item in items if isinstance(items, list) else ():
            read = _status(item) if isinstance(item, dict) else None
            if read is not None:
                yield read
        next_token = page.get("nextPageToken")
        if not isinstance(next_token, str) or not next_token or next_token == token:
            return
        token = next_token


def listing(session: BatchSession) -> AsyncIterator[BatchStatus]:
    return _jobs(session, {})


async def find(session: BatchSession, part: BatchPart, since: float) -> list[str]:
    asked = {"filter": f'display_name="{part.tag}"'}
    return [j.id async for j in _jobs(session, asked) if j.tag == part.tag]


async def cleanup(session: BatchSession, job: BatchStatus | None) -> None:
    if not session.settings.delete_files:
        return
    source = _object(session, "gcs_input", job.where.get("input") if job else None)
    if source is not None:
        await _gcs.delete(session, *source)
    folder = _folder(session, job) if job is not None else None
    if folder is not None:
        for found in [n async for n in _gcs.listing(session, *folder)]:
            await _gcs.delete(session, folder[0], found)


# --- the fake vendor's writers -----------------------------------------------------------


def output_line(
    key: str | None, request: Any, body: dict[str, Any] | None, error: str | None, when: float
) -> dict[str, Any]:
    """One line of `predictions.jsonl` (`key` as the input line had it, or None)."""
    item: dict[str, Any] = {"status": error or "", "processed_time": rfc3339(when)}
    item["request"] = request
    if body is not None:
        item["response"] = body
    if key is not None:
        item["key"] = key
    return item


def job_resource(
    name: str,
    *,
    tag: str,
    model: str,
    state: Any,
    ended_as: Any,
    stats: tuple[int, int, int],
    created: float,
    source: str,
    output: str,
    folder: str | None,
) -> dict[str, Any]:
    """The job `GET batchPredictionJobs/{id}` answers (`folder`: the output folder, once
    results are written)."""
    job: dict[str, Any] = {
        "name": name,
        "displayName": tag,
        "model": f"publishers/google/models/{model}",
        "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [source]}},
        "outputConfig": {
            "predictionsFormat": "jsonl",
            "gcsDestination": {"outputUriPrefix": output},
        },
        "state": state_word(state, ended_as, "JOB_STATE_"),
        "completionStats": {f: str(c) for f, c in zip(STATS, stats, strict=True)},
        "createTime": rfc3339(created),
    }
    if folder is not None:
        job["outputInfo"] = {"gcsOutputDirectory": folder}
    return job


BATCH = BatchWire(
    name="vertex-batch-prediction",
    line=line,
    submit=submit,
    status=status,
    results=results,
    cancel=cancel,
    listing=listing,
    find=find,
    cleanup=cleanup,
    max_requests=200_000,
    max_bytes=1024**3,
    window_hours=72.0,
    answer_body=answer_body,
)
