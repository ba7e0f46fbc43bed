"""Cloud Storage's JSON API, the four calls a Vertex AI batch needs: upload an object,
download one, list a prefix, delete one. Every call goes through the batch session's
`send` (the model's credentials: the OAuth token Vertex AI uses, which Cloud Storage
takes too), to `BatchSettings.storage_url` (default `https://storage.googleapis.com`).

Bucket names are checked (`bucket_name`) and object names are quoted whole, so neither can
move a request to another host or path; `gs://` URIs from the vendor are read by
`parse_gs`, which refuses any other form.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from stream_core.provider import BatchHTTPError, BatchSession

from ._batch_lines import json_or_none

__all__ = [
    "STORAGE_URL",
    "bucket_name",
    "delete",
    "download",
    "gs_uri",
    "listing",
    "object_page",
    "parse_gs",
    "upload",
]

STORAGE_URL = "https://storage.googleapis.com"
MAX_PAGES = 1000
"""Listing pages read at most (a thousand objects each)."""

_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


def bucket_name(value: object, where: str = "BatchSettings.bucket") -> str:
    """A bucket name as Cloud Storage allows it (lowercase letters, digits, `-`, `_`, `.`;
    3 to 222 characters), else `ValueError` naming `where`."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: Vertex AI batches read and write Cloud Storage: name a bucket")
    if not _BUCKET.fullmatch(value) or ".." in value:
        raise ValueError(f"{where}: {value[:80]!r} is not a Cloud Storage bucket name")
    return value


def gs_uri(bucket: str, name: str) -> str:
    return f"gs://{bucket}/{name}"


def parse_gs(uri: object) -> tuple[str, str] | None:
    """(bucket, object name or prefix) of a `gs://bucket/name` URI, else None."""
    if not isinstance(uri, str) or not uri.startswith("gs://") or len(uri) > 2048:
        return None
    bucket, _, name = uri[5:].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket or "\n" in name:
        return None
    return bucket, name


def _base(session: BatchSession) -> str:
    return (session.settings.storage_url or STORAGE_URL).rstrip("/")


def _object_url(session: BatchSession, bucket: str, name: str) -> str:
    return f"{_base(session)}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"


async def upload(
    session: BatchSession,
    bucket: str,
    name: str,
    data: bytes,
    media_type: str = "application/jsonl",
) -> None:
    """Write object `name` (a simple media upload: one request, the whole body)."""
    url = f"{_base(session)}/upload/storage/v1/b/{quote(bucket, safe='')}/o"
    await session.send(
        "POST",
        url,
        content=data,
        params={"uploadType": "media", "name": name},
        headers={"content-type": media_type},
        ok=(200, 201),
    )


async def download(session: BatchSession, bucket: str, name: str) -> bytes:
    """The object's bytes (`BatchHTTPError` `not_found` when it is gone)."""
    response = await session.send(
        "GET", _object_url(session, bucket, name), params={"alt": "media"}
    )
    return response.content


async def listing(session: BatchSession, bucket: str, prefix: str) -> AsyncIterator[str]:
    """The names of the objects under `prefix`, page by page."""
    url = f"{_base(session)}/storage/v1/b/{quote(bucket, safe='')}/o"
    token: str | None = None
    for _ in range(MAX_PAGES):
        params = {"prefix": prefix}
        if token:
            params["pageToken"] = token
        response = await session.send("GET", url, params=params)
        page = json_or_none(response)
        if not isinstance(page, dict):
            return
        items = page.get("items")
        for item in items if isinstance(items, list) else ():
            name = item.get("name") if isinstance(item, dict) else None
            if isinstance(name, str) and name.startswith(prefix):
                yield name
        next_token = page.get("nextPageToken")
        if not isinstance(next_token, str) or not next_token or next_token == token:
            return
        token = next_token


async def delete(session: BatchSession, bucket: str, name: str) -> bool:
    """Delete the object; False when it was already gone."""
    try:
        await session.send("DELETE", _object_url(session, bucket, name), ok=(200, 204))
    except BatchHTTPError as exc:
        if exc.kind == "not_found" or exc.status == 404:
            return False
        raise
    return True


def object_page(bucket: str, names: list[str], sizes: list[int]) -> dict[str, Any]:
    """A listing page as Cloud Storage answers it (the fake vendor's)."""
    items = [
        {"kind": "storage#object", "bucket": bucket, "name": n, "size": str(s)}
        for n, s in zip(names, sizes, strict=True)
    ]
    return {"kind": "storage#objects", "items": items}
