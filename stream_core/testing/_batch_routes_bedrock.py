"""The fake vendor's Bedrock batch inference: create, get, list and stop model invocation
jobs, with a real S3 side.

The control plane is the fake's (a loopback base URL is the control plane too); the objects
are not: a job's input records are read from, and its output lines and manifest written
to, an S3-compatible server (moto's server mode in the tests), named with `use_s3(server,
url)` or the `AWS_ENDPOINT_URL_S3` environment variable, through the same S3 client and
signing as the codec (`providers/_s3.py`). Nothing is written until a job ends; then its
`<input file>.out` (a line per record answered or errored; none for records stopped or
timed out) and `manifest.json.out` appear under `<output s3Uri>/<job id>/`.

Shapes and words are the codec's (`providers/_bedrock_jobs.py`): its job object, output
lines, manifest, status and error words; whole answers are written with its `answer_body`.
A record's answer is the next of its job's model's scenario.
"""

from __future__ import annotations

import json
import os
import re
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ..providers import _aws, _s3
from ..providers import _bedrock_jobs as jobs
from ..providers._batch_lines import is_json, jsonl, unix_time
from ..providers._bedrock_batch import BATCH
from ._batch_serve import BatchBackend, FakeBatch, FakeResult, HTTPAnswer, HTTPAsk, route

if TYPE_CHECKING:
    from ._serve import FakeVendor

__all__ = ["API", "VENDOR", "use_s3"]

VENDOR = "bedrock"
API = "bedrock-converse-stream"
ACCOUNT = "000000000000"
_PREFIX = "fakejb"
"""Job ids are 12 lowercase alphanumerics: this and 6 digits."""
_JOB = re.escape(jobs.JOB)
_FAKE_KEYS = _aws.Credentials("fake-access-key", "fake-secret-key")


@dataclass(frozen=True)
class _Store:
    url: str
    region: str
    credentials: _aws.Credentials


_STORES: weakref.WeakKeyDictionary[BatchBackend, _Store] = weakref.WeakKeyDictionary()
_WRITING = threading.Lock()


def use_s3(
    server: FakeVendor | BatchBackend,
    url: str,
    *,
    region: str = "us-east-1",
    credentials: _aws.Credentials | None = None,
) -> None:
    """Read and write Bedrock batch jobs' objects at the S3-compatible server `url` (the
    environment's AWS credentials sign the requests, else fake ones)."""
    backend = server if isinstance(server, BatchBackend) else server.batches
    found = credentials or _aws.find_credentials() or _FAKE_KEYS
    _STORES[backend] = _Store(url.rstrip("/"), region, found)


def _store(backend: BatchBackend) -> _Store | None:
    store = _STORES.get(backend)
    if store is None:
        url = os.environ.get("AWS_ENDPOINT_URL_S3", "").strip()
        if url.startswith(("http://", "https://")):
            store = _Store(url.rstrip("/"), "us-east-1", _aws.find_credentials() or _FAKE_KEYS)
    return store


def _bucket(store: _Store, bucket: str, client: httpx.Client) -> _s3.BlockingS3:
    return _s3.BlockingS3(_s3.S3(store.url, bucket, store.region, store.credentials), client)


def _error(word: str, message: str) -> HTTPAnswer:
    status = jobs.CONTROL_ERRORS[word][0]
    return HTTPAnswer.of(status, {"message": message}, **{jobs.ERROR_TYPE_HEADER: word})


def _arn(store_region: str, job: str) -> str:
    return f"arn:aws:bedrock:{store_region}:{ACCOUNT}:model-invocation-job/{job}"


# --- create --------------------------------------------------------------------------------


def _field(data: dict[str, Any], *path: str) -> Any:
    value: Any = data
    for key in path:
        value = value.get(key) if type(value) is dict else None
    return value


def _check(data: Any) -> str | None:
    """Why a create call is refused (None: it is not)."""
    if type(data) is not dict:
        return "the body is not a JSON object"
    name = data.get("jobName")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9+.-]{0,62}", name):
        return "jobName: 1 to 63 of A-Z a-z 0-9 + - ., starting with a letter or digit"
    for member in ("roleArn", "modelId"):
        if not isinstance(data.get(member), str) or not data[member]:
            return f"{member}: required"
    for path in (
        ("inputDataConfig", "s3InputDataConfig", "s3Uri"),
        ("outputDataConfig", "s3OutputDataConfig", "s3Uri"),
    ):
        if _s3.parse_uri(_field(data, *path)) is None:
            return f"{'.'.join(path)}: an s3:// URI is required"
    if data.get("modelInvocationType") != jobs.INVOCATION_TYPE:
        return f"modelInvocationType: the fake vendor runs {jobs.INVOCATION_TYPE!r} jobs only"
    hours = data.get("timeoutDurationInHours", jobs.DEFAULT_WINDOW)
    low, high = jobs.WINDOW_HOURS
    if type(hours) is not int or not low <= hours <= high:
        return f"timeoutDurationInHours: an integer from {low} to {high}"
    return None


def _records(store: _Store, uri: str) -> tuple[list[tuple[str, str, dict[str, Any]]], str | None]:
    """(file name, record id, model input) of each input record, or why the job fails."""
    bucket, key = _s3.parse_uri(uri) or ("", "")
    records: list[tuple[str, str, dict[str, Any]]] = []
    try:
        with httpx.Client(timeout=30) as client:
            s3 = _bucket(store, bucket, client)
            keys = [key] if key.endswith(".jsonl") else sorted(
                k for k in s3.keys(key) if k.endswith(".jsonl")
            )  # fmt: skip
            for name in keys:
                body = s3.get(name)
                if body is None:
                    return [], f"no input file at s3://{bucket}/{name}"
                for n, value, _ in jsonl(body):
                    record = value.get("recordId") if type(value) is dict else None
                    given = value.get("modelInput") if type(value) is dict else None
                    if not is_json(value) or not isinstance(record, str) or type(given) is not dict:
                        return [], f"{name}, line {n}: not a record with recordId and modelInput"
                    records.append((name.rsplit("/", 1)[-1], record, given))
    except _s3.S3Error as exc:
        return [], f"cannot read the input: {exc}"
    return records, None


@route("POST", _JOB)
def create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    try:
        data = ask.json()
    except ValueError:
        return _error(jobs.VALIDATION, "the body is not JSON")
    problem = _check(data)
    if problem is not None:
        return _error(jobs.VALIDATION, problem)
    store = _store(backend)
    if store is None:
        text = "fake vendor: no S3 server for Bedrock batches (use_s3, or AWS_ENDPOINT_URL_S3)"
        return _error(jobs.VALIDATION, text)
    token = data.get("clientRequestToken")
    with backend.lock:
        for batch in backend.listing(VENDOR):
            if isinstance(token, str) and batch.meta.get("token") == token:
                return HTTPAnswer.of(200, {"jobArn": batch.meta["arn"]})
        input_uri = _field(data, "inputDataConfig", "s3InputDataConfig", "s3Uri")
        records, failure = _records(store, input_uri)
        limit = backend.queue_limit
        if limit is not None and backend.queued() + len(records) > limit:
            text = f"batch queue full: {backend.queued():,} records queued of {limit:,}"
            return _error(jobs.QUOTA, text)
        meta = {
            "name": data["jobName"], "token": token, "role": data["roleArn"],
            "model": data["modelId"], "input_uri": input_uri,
            "output_uri": _field(data, "outputDataConfig", "s3OutputDataConfig", "s3Uri"),
            "hours": data.get("timeoutDurationInHours", jobs.DEFAULT_WINDOW),
            "files": [name for name, _, _ in records], "failed": failure,
        }  # fmt: skip
        requests = [(rid, API, data["modelId"], given) for _, rid, given in records]
        batch = backend.create(VENDOR, requests, prefix=_PREFIX, meta=meta)
        batch.meta["arn"] = _arn(store.region, batch.id)
        if failure is not None:
            batch.results = []
    return HTTPAnswer.of(200, {"jobArn": batch.meta["arn"]})


# --- a job and its outputs -----------------------------------------------------------------


def _word(backend: BatchBackend, batch: FakeBatch) -> str:
    if batch.meta.get("failed"):
        return jobs.FAILED
    state = batch.state(backend.clock())
    if state == "cancelling":
        return jobs.STOPPING
    if state == "running":
        return jobs.IN_PROGRESS
    outcomes = [r.outcome for r in batch.results or []]
    if "cancelled" in outcomes:
        return jobs.STOPPED
    if outcomes and all(o == "expired" for o in outcomes):
        return jobs.EXPIRED
    return jobs.PARTIAL if "expired" in outcomes else jobs.COMPLETED


def _line(
    backend: BatchBackend, batch: FakeBatch, record: str, given: dict[str, Any], r: FakeResult
) -> dict[str, Any]:
    if r.outcome == "succeeded" and r.message is not None:
        from .._models import Model

        url = backend.server.url
        model = Model(id=batch.meta["model"], api=API, provider="amazon-bedrock", base_url=url)
        try:
            output = BATCH.answer_body(r.message, model) if BATCH.answer_body else None
        except Exception as exc:  # noqa: BLE001 - a block Converse has no words for
            return jobs.output_line(record, given, error=(500, f"fake vendor: {exc}"))
        return jobs.output_line(record, given, output=output)
    return jobs.output_line(record, given, error=(r.status, r.error or "the record failed"))


def _flush(backend: BatchBackend, batch: FakeBatch) -> None:
    """Write an ended job's output lines and manifest to S3, once."""
    with _WRITING:
        if batch.results is None or batch.meta.get("written") or batch.meta.get("failed"):
            return
        store = _store(backend)
        given = {rid: payload for rid, _, _, payload in batch.requests}
        files = dict(
            zip([rid for rid, _, _, _ in batch.requests], batch.meta["files"], strict=True)
        )
        out: dict[str, list[str]] = {}
        succeeded = errored = tokens_in = tokens_out = 0
        for r in batch.results:
            if r.outcome not in ("succeeded", "errored"):
                continue  # stopped or timed out: Bedrock writes no line
            line = _line(backend, batch, r.custom_id, given[r.custom_id], r)
            if "error" in line:
                errored += 1
            else:
                succeeded += 1
                if r.message is not None:
                    tokens_in += r.message.usage.input
                    tokens_out += r.message.usage.output
            out.setdefault(files[r.custom_id], []).append(json.dumps(line) + "\n")
        bucket, prefix = _s3.parse_uri(batch.meta["output_uri"]) or ("", "")
        folder = f"{prefix.rstrip('/')}/{batch.id}/" if prefix.strip("/") else f"{batch.id}/"
        summary = jobs.manifest(len(batch.requests), succeeded, errored, (tokens_in, tokens_out))
        try:
            assert store is not None
            with httpx.Client(timeout=30) as client:
                s3 = _bucket(store, bucket, client)
                for name in dict.fromkeys(batch.meta["files"]):
                    body = "".join(out.get(name, [])).encode()
                    s3.put(folder + name + jobs.OUTPUT_SUFFIX, body)
                s3.put(folder + jobs.MANIFEST, json.dumps(summary).encode())
        except (_s3.S3Error, AssertionError) as exc:
            batch.meta["failed"] = f"cannot write the output: {exc}"
            return
        batch.meta["written"] = True


def _ended_at(backend: BatchBackend, batch: FakeBatch) -> float | None:
    if batch.results is None:
        return None
    if batch.cancelled_at is not None:
        return batch.cancelled_at + backend.cancel_delay
    if batch.expires_at is not None and batch.expires_at <= batch.ends_at:
        return batch.expires_at
    return max(batch.ends_at, batch.created_at)


def _object(backend: BatchBackend, batch: FakeBatch) -> dict[str, Any]:
    _flush(backend, batch)
    meta = batch.meta
    results = batch.results or []
    word = _word(backend, batch)
    answered = [r for r in results if r.outcome in ("succeeded", "errored")]
    ok = sum(1 for r in answered if r.outcome == "succeeded")
    hours = int(meta["hours"])
    return jobs.job_object(
        meta["arn"], word, name=meta["name"], model=meta["model"], role=meta["role"],
        token=meta.get("token"), input_uri=meta["input_uri"], output_uri=meta["output_uri"],
        submitted=batch.created_at,
        expires=batch.expires_at or batch.created_at + hours * 3600, hours=hours,
        total=len(batch.requests), succeeded=ok, errored=len(answered) - ok,
        ended=_ended_at(backend, batch), message=meta.get("failed"),
    )  # fmt: skip


def _find(backend: BatchBackend, said: str) -> FakeBatch | None:
    return backend.get(jobs.job_id(said), VENDOR)


@route("GET", _JOB + r"/(?P<id>.+)")
def get(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = _find(backend, ask.match["id"])
    if batch is None:
        return _error(jobs.NOT_FOUND, f"no model invocation job {ask.match['id'][:200]!r}")
    return HTTPAnswer.of(200, _object(backend, batch))


@route("POST", _JOB + r"/(?P<id>.+)/stop")
def stop(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    batch = _find(backend, ask.match["id"])
    if batch is None:
        return _error(jobs.NOT_FOUND, f"no model invocation job {ask.match['id'][:200]!r}")
    word = _word(backend, batch)
    if batch.results is not None or batch.meta.get("failed"):
        return _error(jobs.CONFLICT, f"the job is {word}: it cannot be stopped")
    backend.cancel(batch.id)
    return HTTPAnswer.of(200, {})


@route("GET", re.escape(jobs.JOBS))
def listing(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    q = ask.query
    text = q.get("maxResults", "1000")
    size = int(text) if text.isdigit() else 0
    if not 1 <= size <= 1000:
        return _error(jobs.VALIDATION, "maxResults: an integer from 1 to 1000")
    found = backend.listing(VENDOR)  # newest first
    if q.get("sortOrder") == "Ascending":
        found.reverse()
    after, before = unix_time(q.get("submitTimeAfter")), unix_time(q.get("submitTimeBefore"))
    name, word = q.get("nameContains"), q.get("statusEquals")
    kept = [
        b
        for b in found
        if (name is None or name in b.meta["name"])
        and (after is None or b.created_at >= after)
        and (before is None or b.created_at <= before)
    ]
    page_from = int(q["nextToken"]) if q.get("nextToken", "").isdigit() else 0
    objects = [_object(backend, b) for b in kept]
    if word is not None:
        objects = [o for o in objects if o["status"] == word]
    page = objects[page_from : page_from + size]
    data: dict[str, Any] = {"invocationJobSummaries": page}
    if page_from + size < len(objects):
        data["nextToken"] = str(page_from + size)
    return HTTPAnswer.of(200, data)
