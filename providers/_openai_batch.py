"""OpenAI Batch: Chat Completions (`/v1/chat/completions`) and Responses (`/v1/responses`)
requests run later at half price (`BatchWire`, see `stream_core._batch_wire`).

The input is a JSONL file uploaded to `POST {base}/files` (multipart, `purpose=batch`), one
line per request: `{"custom_id", "method": "POST", "url": <endpoint>, "body": <the
streaming payload without stream and stream_options>}`. `POST {base}/batches` creates the
batch (`input_file_id`, `endpoint`, `completion_window` `24h`, our tag in `metadata`).
Every request of one batch names the same endpoint and model. `GET /batches/{id}` says
where it is (`STATES`) and, once it ended, which files hold the results: the output file
(`output_file_id`: lines whose `response.status_code` is 2xx and whose `response.body` is
the whole answer, a `chat.completion` or a `response` object) and the error file
(`error_file_id`: lines with a 4xx/5xx `response` whose body is OpenAI's error, or with a
top-level `error` `{"code", "message"}`: `batch_expired` for a request the 24-hour window
ran out on, `batch_cancelled` for one a cancel stopped). `GET /files/{id}/content` reads
them; `DELETE /files/{id}` removes them.

A batch OpenAI refuses for its queue (the organization's enqueued-token limit, code
`token_limit_exceeded`, found at validation, after the create was accepted) is reported
by `submit` as `BatchHTTPError` kind `rate_limit` when it has failed by the time of the
check that follows the create; once found later it is a `failed` batch whose `error`
starts with that code (`refused`: the engine submits the part again), and `find` never
adopts it. A 429 on the create is the session's
`BatchHTTPError` kind `rate_limit` with the vendor's `Retry-After`.

The words, writers and readers are `_openai_batch_shapes`'s: the fake vendor
(`stream_core.testing._batch_routes_openai`) writes its files and objects with them
(`input_line`, `result_line`, `batch_object`, `file_object`, `list_page`, `answer_body`,
and `_chat_encode.error_body` for errors), and the round-trip tests read them back here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

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

from ._batch_lines import Unreadable, json_body, text_of
from ._openai_batch_shapes import (
    CANCELLED_CODE,
    ENDPOINTS,
    ERROR_FILE,
    EXPIRED_CODE,
    INPUT_FILE,
    MAX_BYTES,
    MAX_REQUESTS,
    OUTPUT_FILE,
    PURPOSE,
    QUEUE_FULL_CODE,
    STATES,
    STREAM_FIELDS,
    TAG_KEY,
    WINDOW_HOURS,
    answer_body,
    input_line,
    queue_full,
    read_line,
    read_status,
)

__all__ = [
    "BATCH",
    "CANCELLED_CODE",
    "ENDPOINTS",
    "EXPIRED_CODE",
    "QUEUE_FULL_CODE",
    "STATES",
    "TAG_KEY",
    "answer_body",
    "read_line",
    "read_status",
]

_PAGE = 100
_MAX_PAGES = 1000
_FIND_PAGES = 50
_FIND_SLACK = 600.0
"""Seconds of clock difference `find` allows between us and the vendor."""


# --- the API ------------------------------------------------------------------------------


def _line(custom_id: str, request: WireRequest, model: Model) -> dict[str, Any]:
    endpoint = ENDPOINTS.get(model.api)
    if endpoint is None:
        raise ValueError(f"model: {model.api} has no OpenAI Batch endpoint")
    body = {k: v for k, v in request.payload.items() if k not in STREAM_FIELDS}
    return input_line(custom_id, endpoint, body)


def _file_body(lines: Sequence[Mapping[str, Any]]) -> bytes:
    text = "".join(
        json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines
    )
    return text.encode("utf-8", "replace")  # `plan` left no lone surrogate


async def _submit(session: BatchSession, part: BatchPart) -> str:
    if not part.lines:
        raise ValueError("an OpenAI batch needs at least one request")
    urls = {line.get("url") for line in part.lines}
    if len(urls) != 1:
        raise ValueError(
            f"an OpenAI batch takes one endpoint; these lines name {sorted(map(str, urls))}"
        )
    endpoint = str(urls.pop())
    if len(part.lines) > MAX_REQUESTS:
        raise ValueError(f"an OpenAI batch takes at most {MAX_REQUESTS:,} requests")
    file_id = session.recorded.get("input_file_id")
    if type(file_id) is not str or not file_id:
        data = _file_body(part.lines)
        if len(data) > MAX_BYTES:
            raise ValueError(
                f"an OpenAI batch file is at most {MAX_BYTES:,} bytes, not {len(data):,}"
            )
        response = await session.send(
            "POST",
            session.url("/files"),
            files={"file": (f"{part.tag}.jsonl", data, "application/jsonl")},
            data={"purpose": PURPOSE},
        )
        uploaded = json_body(response, "file upload")
        file_id = uploaded.get("id") if type(uploaded) is dict else None
        if type(file_id) is not str or not file_id:
            raise BatchHTTPError(
                "protocol", response.status_code, f"file upload: no file id in {text_of(uploaded)}"
            )
        session.record(input_file_id=file_id)
    hours = session.settings.window_hours or WINDOW_HOURS
    response = await session.send(
        "POST",
        session.url("/batches"),
        json={
            "input_file_id": file_id,
            "endpoint": endpoint,
            "completion_window": f"{hours}h",
            "metadata": {TAG_KEY: part.tag},
        },
    )
    created = read_status(json_body(response, "batch create"))
    checked = created
    if created.state == "submitted":
        try:
            checked = await _status_of(session, created.id)
        except BatchHTTPError:
            return created.id  # the batch exists: its status is read later
    if queue_full(checked):
        raise BatchHTTPError(
            "rate_limit",
            None,
            f"OpenAI batch {checked.id} was refused by the batch queue ({checked.error}); "
            "its requests did not run: submit them again later",
        )
    return created.id


async def _status_of(session: BatchSession, batch_id: str) -> BatchStatus:
    response = await session.send("GET", session.url(f"/batches/{quote(batch_id, safe='')}"))
    return read_status(json_body(response, "batch status"))


async def _results(session: BatchSession, status: BatchStatus) -> AsyncIterator[RawResult]:
    unreadable = Unreadable(f"OpenAI batch {status.id}")
    for key in (OUTPUT_FILE, ERROR_FILE):
        file_id = status.where.get(key)
        if type(file_id) is not str or not file_id:
            continue
        url = session.url(f"/files/{quote(file_id, safe='')}/content")
        response = await session.send("GET", url)
        for result in unreadable.read(response.content, read_line):
            yield result
    unreadable.report()  # the engine gives their requests back errored (protocol)


async def _cancel(session: BatchSession, batch_id: str) -> None:
    url = session.url(f"/batches/{quote(batch_id, safe='')}/cancel")
    try:
        await session.send("POST", url)
    except BatchHTTPError as exc:
        if exc.status not in (400, 409):
            raise
        status = await _status_of(session, batch_id)
        if status.state not in ("ended", "failed", "cancelling"):
            raise


async def _listing(session: BatchSession) -> AsyncIterator[BatchStatus]:
    after: str | None = None
    seen: set[str] = set()
    asked: set[str] = set()
    for _ in range(_MAX_PAGES):
        params = {"limit": str(_PAGE)}
        if after is not None:
            params["after"] = after
        response = await session.send("GET", session.url("/batches"), params=params)
        page = json_body(response, "batch listing")
        items = page.get("data") if type(page) is dict else None
        if type(items) is not list or not items:
            return
        last: str | None = None
        for item in items:
            try:
                status = read_status(item)
            except BatchHTTPError:
                continue  # not a batch: nothing of ours to list
            last = status.id
            if status.id not in seen:
                seen.add(status.id)
                yield status
        said_last = page.get("last_id")
        after = said_last if type(said_last) is str and said_last else last
        if page.get("has_more") is not True or after is None or after in asked:
            return  # the end, or a vendor that would page forever
        asked.add(after)


async def _find(session: BatchSession, part: BatchPart, since: float) -> list[str]:
    found: list[str] = []
    scanned = 0
    async for status in _listing(session):
        scanned += 1
        if status.created_at is not None and status.created_at < since - _FIND_SLACK:
            break
        if status.tag == part.tag and not queue_full(status):
            found.append(status.id)
        if scanned >= _FIND_PAGES * _PAGE:
            break
    return found


async def _cleanup(session: BatchSession, status: BatchStatus | None) -> None:
    ids: list[str] = []
    recorded = session.recorded.get("input_file_id")
    if type(recorded) is str and recorded:
        ids.append(recorded)
    if status is not None:
        ids += [
            v
            for k in (INPUT_FILE, OUTPUT_FILE, ERROR_FILE)
            if type(v := status.where.get(k)) is str
        ]
    for file_id in dict.fromkeys(ids):
        url = session.url(f"/files/{quote(file_id, safe='')}")
        try:
            await session.send("DELETE", url, ok=(200, 404))
        except BatchHTTPError as exc:
            if exc.kind != "not_found":
                raise


BATCH = BatchWire(
    name="openai-batch",
    line=_line,
    submit=_submit,
    status=_status_of,
    results=_results,
    cancel=_cancel,
    listing=_listing,
    find=_find,
    cleanup=_cleanup,
    refused=queue_full,
    max_requests=MAX_REQUESTS,
    max_bytes=MAX_BYTES,
    min_requests=1,
    one_model=True,
    window_hours=float(WINDOW_HOURS),
    answer_body=answer_body,
)
