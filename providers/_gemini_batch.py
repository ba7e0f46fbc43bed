"""Gemini API batch mode: `POST {base}/models/{model}:batchGenerateContent`.

A part is one batch. Its requests go inline (`inputConfig.requests.requests[]`, each
`{request, metadata: {key}}`) while the whole body stays under `INLINE_BYTES` (the API
takes 20 MB inline), else as a JSON Lines file (`{key, request}` a line) uploaded to the
Files API first (resumable protocol: `POST {root}/upload/v1beta/files` with `start`, then
the bytes to the upload URL with `upload, finalize`; the file's name is recorded before
the batch is created). `batch.displayName` is our tag: `find` matches it.

The batch is a long-running operation named `batches/{id}` (its id is `{id}`): `metadata`
holds the batch (`state`: `BATCH_STATE_*`, or `JOB_STATE_*` as some versions say;
`batchStats` with int64 counts as strings; `output`), `response` the same output once done.
Results are `output.inlinedResponses.inlinedResponses[]` (`{response | error, metadata.key}`) or
`output.responsesFile` (`files/...`, read at `{root}/download/v1beta/{file}:download?alt=
media`, `{key, response | error}` a line). Both are in input order, so a line without its
key is the request at its place (the recorded custom ids); an error is a
`google.rpc.Status`. A request no line answers, once the batch ended, is a result too:
expired or cancelled when the batch ended so, else a protocol error.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from stream_core import Model
from stream_core.provider import (
    BatchHTTPError,
    BatchPart,
    BatchSession,
    BatchStatus,
    BatchWire,
    RawResult,
    WireRequest,
)

from ._batch_lines import json_or_none
from ._gemini_whole import answer_body, error_object
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
    safe_path,
    state_word,
    timestamp,
)

__all__ = [
    "BATCH",
    "INLINE_BYTES",
    "STATS",
    "answer_body",
    "batch_resource",
    "error_object",
    "file_line",
    "inline_response",
]

INLINE_BYTES = 19_000_000
"""A part whose inline body is larger goes as an uploaded file (the API takes 20 MB)."""
MAX_PAGES = 50
PAGE_SIZE = "100"
STATS = ("requestCount", "successfulRequestCount", "failedRequestCount", "pendingRequestCount")
"""`batchStats`' counts: all, succeeded, failed, not yet run."""
_BATCH, _FILE = "batches/", "files/"
_ANSWER_KEYS = ("candidates", "promptFeedback", "usageMetadata")


# --- lines and submission ----------------------------------------------------------------


def line(custom_id: str, request: WireRequest, model: Model) -> dict[str, Any]:
    """`{key, request}`: the request as `stream()` sends it (Gemini's streaming is in the
    URL, so the payload has no streaming field to remove)."""
    return {"key": custom_id, "request": request.payload}


def _root(session: BatchSession) -> tuple[str, str]:
    """(the API's root, its version): `https://host`, `v1beta` for a `.../v1beta` base."""
    base = session.model.base_url.rstrip("/")
    head, _, last = base.rpartition("/")
    if last.startswith("v") and last[1:2].isdigit() and "//" in head:
        return head, last
    return base, "v1beta"


def _same_host(url: str, root: str) -> str:
    """The upload URL the vendor gave, sent to our own host: its credentials go nowhere
    else (a custom base URL is kept, as Google's SDK does)."""
    given, ours = urlsplit(url), urlsplit(root)
    return urlunsplit((ours.scheme, ours.netloc, given.path, given.query, ""))


async def _upload(session: BatchSession, data: bytes, tag: str) -> str:
    root, version = _root(session)
    start = await session.send(
        "POST",
        f"{root}/upload/{version}/files",
        json={"file": {"displayName": tag}},
        headers={
            "X-Goog-Upload-Protocol": "resumable",
            "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Length": str(len(data)),
            "X-Goog-Upload-Header-Content-Type": "application/jsonl",
        },
    )
    url = start.headers.get("x-goog-upload-url")
    if not url:
        raise BatchHTTPError(
            "protocol", start.status_code, "Files API: no upload URL in its answer"
        )
    done = await session.send(
        "POST",
        _same_host(url, root),
        content=data,
        headers={
            "X-Goog-Upload-Command": "upload, finalize",
            "X-Goog-Upload-Offset": "0",
            "content-type": "application/jsonl",
        },
    )
    found = json_or_none(done)
    file = found.get("file", found) if isinstance(found, dict) else None
    name = safe_path(file.get("name") if isinstance(file, dict) else None, _FILE)
    if name is None:
        raise BatchHTTPError(
            "protocol", done.status_code, f"Files API: no file name: {clip(found)}"
        )
    return name


async def submit(session: BatchSession, part: BatchPart) -> str:
    keys = [str(item["key"]) for item in part.lines]
    session.record(keys=pack_keys(keys))
    inline = [{"request": item["request"], "metadata": {"key": item["key"]}} for item in part.lines]
    text = json.dumps(inline, ensure_ascii=False)
    config: dict[str, Any]
    uploaded = safe_path(session.recorded.get("gemini_file"), _FILE)
    if uploaded is None and len(text.encode("utf-8")) <= INLINE_BYTES:
        config = {"requests": {"requests": inline}}
    else:
        if uploaded is None:  # else a killed process uploaded it: the same lines
            data = "\n".join(json.dumps(item, ensure_ascii=False) for item in part.lines)
            uploaded = await _upload(session, data.encode(), part.tag)
            session.record(gemini_file=uploaded)
        config = {"fileName": uploaded}
    del text
    batch = {"displayName": part.tag, "model": f"models/{part.model.id}", "inputConfig": config}
    url = session.url(f"models/{part.model.id}:batchGenerateContent")
    response = await session.send("POST", url, json={"batch": batch}, headers=part.headers)
    found = json_or_none(response)
    status = _status(found) if isinstance(found, dict) else None
    if status is None:
        raise BatchHTTPError("protocol", response.status_code, f"no batch name in: {clip(found)}")
    return status.id


# --- status ------------------------------------------------------------------------------


def _output(obj: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    for found in (meta.get("output"), obj.get("response")):
        if isinstance(found, dict) and ("responsesFile" in found or "inlinedResponses" in found):
            return found
    return {}


def _status(obj: dict[str, Any]) -> BatchStatus | None:
    """A batch (the operation, or the batch itself) as ours; None without a usable name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj
    name = safe_path(obj.get("name"), _BATCH) or safe_path(meta.get("name"), _BATCH)
    if name is None:
        return None
    word = meta.get("state")
    word = word if isinstance(word, str) else ""
    state = STATES.get(word, "running")
    error = obj.get("error") if isinstance(obj.get("error"), dict) else meta.get("error")
    problem: str | None = None
    if isinstance(error, dict):
        said = error.get("message")
        problem = clip(said if isinstance(said, str) else error, 1000)
        if obj.get("done") is True and state != "ended":
            state = "failed"
    stats = meta.get("batchStats")
    stats = stats if isinstance(stats, dict) else {}
    total, succeeded, failed = (count(stats.get(f)) for f in STATS[:3])
    output = _output(obj, meta)
    where: dict[str, Any] = {}
    file = safe_path(output.get("responsesFile"), _FILE)
    if file is not None:
        where["responses_file"] = file
    elif "inlinedResponses" in output:
        where["inline"] = True
    config = meta.get("inputConfig")
    source = safe_path(config.get("fileName") if isinstance(config, dict) else None, _FILE)
    if source is not None:
        where["input_file"] = source
    tag, model = meta.get("displayName"), meta.get("model")
    return BatchStatus(
        id=name.removeprefix(_BATCH),
        state=state,
        vendor_state=word[:100],
        counts=counts_of(total, succeeded, failed, ENDED_AS.get(word)),
        created_at=timestamp(meta.get("createTime")),
        tag=tag if isinstance(tag, str) else None,
        where=where,
        error=problem,
        model=model.removeprefix("models/") if isinstance(model, str) else None,
    )


def _batch_url(session: BatchSession, batch_id: str, suffix: str = "") -> str:
    """`{base}/batches/{id}`: the id alone, or the name `batches/{id}`."""
    name = batch_id if batch_id.startswith(_BATCH) else _BATCH + batch_id
    if safe_path(name, _BATCH) is None:
        raise BatchHTTPError("invalid_request", None, f"not a Gemini batch id: {clip(batch_id)}")
    return session.url(name + suffix)


async def status(session: BatchSession, batch_id: str) -> BatchStatus:
    response = await session.send("GET", _batch_url(session, batch_id))
    found = json_or_none(response)
    read = _status(found) if isinstance(found, dict) else None
    if read is None:
        raise BatchHTTPError("protocol", response.status_code, f"not a batch: {clip(found)}")
    return read


# --- results -------------------------------------------------------------------------------


def _one(keys: Keys, item: Any, n: int, key: Any) -> RawResult | None:
    """A result line (an inline response or a file's line) as a result; None for a repeat."""
    custom_id = keys.take(key, n)
    if custom_id is None:
        return None
    if custom_id == "":
        return keys.unread(json.dumps(item)[:300], "a result names no request of this batch")
    if not isinstance(item, dict):
        return protocol(custom_id, f"a result line that is not an object: {clip(item)}")
    response, error = item.get("response"), item.get("error")
    if response is None and error is None:
        if any(k in item for k in _ANSWER_KEYS):
            response = item  # the bare answer, as the docs say a line may be
        else:
            error = item.get("status") or (item if "code" in item or "message" in item else None)
    return result_of(custom_id, response, error)


def _sent_keys(meta: dict[str, Any]) -> list[str] | None:
    """The custom ids of an inline batch as the batch echoes its input, when nothing was
    recorded (None: it echoes none, or not all of them)."""
    config = meta.get("inputConfig")
    sent = config.get("requests") if isinstance(config, dict) else None
    items = sent.get("requests") if isinstance(sent, dict) else None
    if not isinstance(items, list) or not items:
        return None
    keys = [_key(item, inline=True) for item in items]
    found = [k for k in keys if isinstance(k, str) and k]
    return found if len(found) == len(keys) == len(set(found)) else None


def _key(item: Any, inline: bool) -> Any:
    if not isinstance(item, dict):
        return None
    if inline:
        meta = item.get("metadata")
        return meta.get("key") if isinstance(meta, dict) else None
    return item.get("key")


async def results(session: BatchSession, batch: BatchStatus) -> AsyncIterator[RawResult]:
    keys = Keys(recorded_keys(session))
    file = safe_path(batch.where.get("responses_file"), _FILE)
    if file is not None:
        root, version = _root(session)
        url = f"{root}/download/{version}/{file}:download"
        data = (await session.send("GET", url, params={"alt": "media"})).content
        for n, item, why in jsonl(data):
            if why is not None:
                custom_id = keys.take(None, n)
                if custom_id is not None:
                    yield (
                        protocol(custom_id, why) if custom_id else keys.unread(why, "a result line")
                    )
                continue
            found = _one(keys, item, n, _key(item, inline=False))
            if found is not None:
                yield found
    elif batch.where.get("inline"):
        response = await session.send("GET", _batch_url(session, batch.id))
        obj = json_or_none(response)
        obj = obj if isinstance(obj, dict) else {}
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else obj
        if keys.known is None:
            keys = Keys(_sent_keys(meta))
        inlined = _output(obj, meta).get("inlinedResponses")
        items = inlined.get("inlinedResponses") if isinstance(inlined, dict) else inlined
        for n, item in enumerate(items if isinstance(items, list) else ()):
            found = _one(keys, item, n, _key(item, inline=True))
            if found is not None:
                yield found
    for missing in keys.missing(batch.state, batch.vendor_state, ENDED_AS.get(batch.vendor_state)):
        yield missing


# --- cancel, listing, find, cleanup ------------------------------------------------------


async def cancel(session: BatchSession, batch_id: str) -> None:
    try:
        await session.send("POST", _batch_url(session, batch_id, ":cancel"), json={})
    except BatchHTTPError as exc:
        if exc.status not in (400, 409):
            raise
        now = await status(session, batch_id)  # already ended: nothing to cancel
        if now.state not in ("ended", "failed"):
            raise


async def listing(session: BatchSession) -> AsyncIterator[BatchStatus]:
    token: str | None = None
    for _ in range(MAX_PAGES):
        params = {"pageSize": PAGE_SIZE}
        if token:
            params["pageToken"] = token
        page = json_or_none(await session.send("GET", session.url("batches"), params=params))
        if not isinstance(page, dict):
            return
        items = page.get("operations", page.get("batches"))
        for item in items if isinstance(items, list) else ():
            read = _status(item) if isinstance(item, dict) else None
            if read is not None:
                yield read
        next_token = page.get("nextPageToken")
        if not isinstance(next_token, str) or not next_token or next_token == token:
            return
        token = next_token


async def find(session: BatchSession, part: BatchPart, since: float) -> list[str]:
    return [b.id async for b in listing(session) if b.tag == part.tag]


async def _delete_file(session: BatchSession, name: object) -> None:
    file = safe_path(name, _FILE)
    if file is None:
        return
    try:
        await session.send("DELETE", session.url(file), ok=(200, 204))
    except BatchHTTPError as exc:
        if exc.kind != "not_found" and exc.status != 404:
            raise


async def cleanup(session: BatchSession, batch: BatchStatus | None) -> None:
    if not session.settings.delete_files:
        return
    names = [session.recorded.get("gemini_file")]
    if batch is not None:
        names += [batch.where.get("input_file"), batch.where.get("responses_file")]
    for name in dict.fromkeys(n for n in names if isinstance(n, str)):
        await _delete_file(session, name)


# --- the fake vendor's writers -----------------------------------------------------------


def inline_response(key: str, body: dict[str, Any] | None, error: dict[str, Any] | None) -> Any:
    """One `inlinedResponses[]` entry."""
    item: dict[str, Any] = {"response": body} if error is None else {"error": error}
    item["metadata"] = {"key": key}
    return item


def file_line(key: str, body: dict[str, Any] | None, error: dict[str, Any] | None) -> Any:
    """One line of a responses file."""
    return {"key": key, "response": body} if error is None else {"key": key, "error": error}


def batch_resource(
    name: str,
    *,
    tag: str,
    model: str,
    state: Any,
    ended_as: Any,
    stats: tuple[int, int, int],
    created: float,
    output: dict[str, Any] | None,
    source: str | list[Any] | None = None,
) -> dict[str, Any]:
    """The operation `GET batches/{id}` answers (`output`: `{"inline": [...]}` or
    `{"file": name}`, once done; `source`: the input file's name, or the inline requests)."""
    total, succeeded, failed = stats
    counts = [total, succeeded, failed, max(total - succeeded - failed, 0)]
    meta: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
        "name": name,
        "model": f"models/{model}",
        "displayName": tag,
        "createTime": rfc3339(created),
        "state": state_word(state, ended_as, "BATCH_STATE_"),
        "batchStats": {f: str(c) for f, c in zip(STATS, counts, strict=True)},
    }
    if isinstance(source, str):
        meta["inputConfig"] = {"fileName": source}
    elif isinstance(source, list):  # the inline requests, as sent
        meta["inputConfig"] = {"requests": {"requests": source}}
    obj: dict[str, Any] = {"name": name, "metadata": meta, "done": output is not None}
    if output is not None:
        if "file" in output:
            said: dict[str, Any] = {"responsesFile": output["file"]}
        else:
            said = {"inlinedResponses": {"inlinedResponses": output.get("inline", [])}}
        meta["output"] = said
        obj["response"] = {"@type": meta["@type"] + "Output", **said}
    return obj


BATCH = BatchWire(
    name="gemini-batch-mode",
    line=line,
    submit=submit,
    status=status,
    results=results,
    cancel=cancel,
    listing=listing,
    find=find,
    cleanup=cleanup,
    max_requests=50_000,
    max_bytes=2 * 1024**3,
    window_hours=48.0,
    answer_body=answer_body,
)
