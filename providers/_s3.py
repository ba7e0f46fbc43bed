"""A minimal S3 client for Bedrock batch inference: put, get, list by prefix, delete.

Path-style URLs (`{storage_url}/{bucket}/{key}`), so any S3-compatible server answers
(a VPC endpoint, MinIO, moto), each request signed with SigV4 for service `s3`
(`providers/_aws.py`: the key encoded once, the body's hash sent and signed as
`x-amz-content-sha256`). Codecs send through the batch session (`send(..., signer=)`),
which retries reads, deletes and puts and names failures by kind; the fake vendor, which
reads a job's input and writes its outputs from its own threads, uses `BlockingS3` on a
plain `httpx.Client`.

Keys are limited to the characters Bedrock takes in an `s3Uri` (`KEY_CHARS`), and buckets
to S3's names (`BUCKET`): anything else raises `ValueError` naming the setting.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from stream_core.provider import BatchHTTPError, BatchSession

from . import _aws

__all__ = [
    "BUCKET",
    "KEY_CHARS",
    "S3",
    "BlockingS3",
    "S3Error",
    "delete_object",
    "get_object",
    "list_keys",
    "parse_listing",
    "parse_uri",
    "put_object",
    "uri",
]

SERVICE = "s3"
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
"""An S3 bucket name (lower case, digits, dots and hyphens, 3 to 63 characters)."""
KEY_CHARS = re.compile(r"^[A-Za-z0-9!_.*'()/-]+$")
"""The characters of a key Bedrock accepts in an `s3Uri` (its `S3Uri` pattern)."""
_LIST_PAGE = 1000
_MAX_PAGES = 10_000
_MAX_LISTING = 16 * 1024 * 1024
"""The most a listing page may weigh (a page of 1,000 keys is some 300 KB)."""


@dataclass(frozen=True)
class S3:
    """Where objects go and how requests to them are signed."""

    base: str
    """The storage URL, without a trailing slash (`https://s3.us-east-1.amazonaws.com`)."""
    bucket: str
    region: str
    credentials: _aws.Credentials = field(repr=False)

    def url(self, key: str = "") -> str:
        path = "/" + quote(self.bucket, safe="")
        if key:
            path += "/" + quote(key, safe="/-_.~")
        return self.base + path

    def sign(self, request: httpx.Request) -> tuple[str, ...]:
        """Sign `request` in place; the secrets to keep out of errors."""
        _aws.sign_request(request, self.credentials, region=self.region, service=SERVICE)
        return self.credentials.secrets


def uri(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def parse_uri(value: object) -> tuple[str, str] | None:
    """(bucket, key) of an `s3://bucket/key` URI; None for anything else."""
    if not isinstance(value, str) or not value.startswith("s3://") or len(value) > 2048:
        return None
    bucket, _, key = value[5:].partition("/")
    if not BUCKET.match(bucket) or (key and not KEY_CHARS.match(key)):
        return None
    return bucket, key


def parse_listing(body: bytes) -> tuple[list[str], str | None]:
    """(the keys, the continuation token or None) of a ListObjectsV2 page; `ValueError`
    for a body that is not one."""
    if len(body) > _MAX_LISTING:
        raise ValueError(f"a listing page of {len(body):,} bytes")
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise ValueError("a listing page with a document type or entities")
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise ValueError(f"a listing page that is not XML: {exc}") from None
    keys: list[str] = []
    token: str | None = None
    truncated = False
    for element in root:
        name = element.tag.rsplit("}", 1)[-1]
        if name == "Contents":
            for child in element:
                if child.tag.rsplit("}", 1)[-1] == "Key" and child.text:
                    keys.append(child.text)
        elif name == "IsTruncated":
            truncated = (element.text or "").strip().lower() == "true"
        elif name == "NextContinuationToken":
            token = (element.text or "").strip() or None
    return keys, token if truncated else None


# --- through a batch session ----------------------------------------------------------------


async def put_object(session: BatchSession, s3: S3, key: str, data: bytes) -> None:
    await session.send("PUT", s3.url(key), content=data, signer=s3.sign, ok=(200,))


async def get_object(session: BatchSession, s3: S3, key: str) -> bytes | None:
    """The object's bytes; None when there is none."""
    response = await session.send("GET", s3.url(key), signer=s3.sign, ok=(200, 404))
    return None if response.status_code == 404 else response.content


async def list_keys(session: BatchSession, s3: S3, prefix: str) -> list[str]:
    """Every key starting with `prefix`, in the store's order (UTF-8 binary)."""
    keys: list[str] = []
    token: str | None = None
    for _ in range(_MAX_PAGES):
        params = {"list-type": "2", "prefix": prefix, "max-keys": str(_LIST_PAGE)}
        if token is not None:
            params["continuation-token"] = token
        response = await session.send("GET", s3.url(), params=params, signer=s3.sign)
        try:
            page, following = parse_listing(response.content)
        except ValueError as exc:
            raise BatchHTTPError("protocol", response.status_code, f"S3 listing: {exc}") from None
        keys += [k for k in page if k.startswith(prefix)]
        if following is None or following == token:
            break
        token = following
    return keys


async def delete_object(session: BatchSession, s3: S3, key: str) -> None:
    """Delete the object; one already gone is no error."""
    await session.send("DELETE", s3.url(key), signer=s3.sign, ok=(200, 204, 404))


# --- blocking, on a plain client (the fake vendor's threads) --------------------------------


class S3Error(Exception):
    """An S3 request of `BlockingS3` that failed: its status (None: no answer) and words."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status


class BlockingS3:
    """`put`, `get`, `keys` and `delete` on a plain `httpx.Client`, signed the same way."""

    def __init__(self, s3: S3, client: httpx.Client) -> None:
        self.s3 = s3
        self.client = client

    def _send(self, method: str, key: str, ok: tuple[int, ...], **kwargs: Any) -> httpx.Response:
        request = self.client.build_request(method, self.s3.url(key), **kwargs)
        self.s3.sign(request)
        try:
            response = self.client.send(request)
        except httpx.HTTPError as exc:
            raise S3Error(None, f"{method} {key!r}: {type(exc).__name__}: {exc}") from None
        if response.status_code not in ok:
            words = response.text[:300]
            raise S3Error(response.status_code, f"{method} {key!r}: {response.status_code} {words}")
        return response

    def put(self, key: str, data: bytes) -> None:
        self._send("PUT", key, (200,), content=data)

    def get(self, key: str) -> bytes | None:
        response = self._send("GET", key, (200, 404))
        return None if response.status_code == 404 else response.content

    def keys(self, prefix: str) -> list[str]:
        found: list[str] = []
        token: str | None = None
        for _ in range(_MAX_PAGES):
            params = {"list-type": "2", "prefix": prefix}
            if token is not None:
                params["continuation-token"] = token
            response = self._send("GET", "", (200,), params=params)
            try:
                page, following = parse_listing(response.content)
            except ValueError as exc:
                raise S3Error(response.status_code, f"listing {prefix!r}: {exc}") from None
            found += [k for k in page if k.startswith(prefix)]
            if following is None or following == token:
                break
            token = following
        return found

    def delete(self, key: str) -> None:
        self._send("DELETE", key, (200, 204, 404))
