"""The `BatchSession` a codec is handed: every HTTP exchange of a batch, and its journal.

Credentials are the ones `stream()` would send (`credentials`): the API key header, the
bearer token, or the request signed in place (AWS SigV4, exact body bytes included). A
status outside what the codec expects raises `BatchHTTPError` with the kind the status
and the vendor's words say, never a secret. Reads (GET, HEAD) and deletes are retried on
a network error, a 429 or a 5xx, a few times with a short backoff; a create (POST) is never
sent twice blindly: after a lost answer the engine asks the vendor what exists (`find`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import httpx

from stream_core import Model, StreamOptions
from stream_core._error_text import (
    _ERROR_BODY_LIMIT,
    retry_after_seconds,
    retry_delay_in_body,
    vendor_error_text,
)
from stream_core._errors import redact
from stream_core._transport import shared_client_async
from stream_core.provider import (
    BatchHTTPError,
    BatchSettings,
    WireAPI,
    credentials,
    error_from_status,
)

from ._journal import Journal

__all__ = ["HttpSession"]

logger = logging.getLogger("stream_core")

_READS = frozenset({"GET", "HEAD", "DELETE"})
_TRIES = 4
_BACKOFF = 0.25


class HttpSession:
    """One part's session (see the module docstring)."""

    def __init__(
        self,
        wire: WireAPI,
        model: Model,
        options: StreamOptions,
        settings: BatchSettings,
        journal: Journal | None,
        part: int | None,
        recorded: dict[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.wire = wire
        self.model = model
        self.options = options
        self.settings = settings
        self._journal = journal
        self._part = part
        # The part's own dict, shared: what a step records is seen by the part's later
        # sessions in this process as well as (through the journal) after a restart.
        self._recorded: dict[str, Any] = recorded if recorded is not None else {}
        self._client = client
        self._headers: dict[str, str] | None = None
        self._api_key: str | None = None
        self._secrets: tuple[str, ...] = ()
        self._timeout = httpx.Timeout(120.0, connect=options.connect_timeout)

    @property
    def recorded(self) -> Mapping[str, Any]:
        return self._recorded

    def record(self, **fields: Any) -> None:
        self._recorded.update(fields)
        if self._journal is not None:
            self._journal.record("step", part=self._part, **fields)

    def url(self, path: str) -> str:
        return self.model.base_url.rstrip("/") + "/" + path.lstrip("/")

    async def _auth(self) -> dict[str, str]:
        if self._headers is None:
            found = await credentials(self.wire, self.model, self.options)
            if found.missing is not None:
                raise BatchHTTPError("auth", None, found.missing)
            self._headers, self._api_key, self._secrets = (
                found.headers,
                found.api_key,
                found.secrets,
            )
        return self._headers

    async def _http(self, url: str) -> httpx.AsyncClient:
        """The caller's client, else the keep-alive client `stream()` shares on this event
        loop (closed when the loop ends: a session never leaves a connection behind)."""
        if self._client is None:
            self._client = self.options.client or await shared_client_async(
                tls=not url.startswith("http://")
            )
        return self._client

    async def aclose(self) -> None:
        self._client = None

    async def send(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        files: Mapping[str, Any] | None = None,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        signer: Callable[[httpx.Request], tuple[str, ...]] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        _check_url(method, url)
        auth = {} if signer is not None else await self._auth()
        tries = _TRIES if method.upper() in _READS or signer is not None and method == "PUT" else 1
        client = await self._http(url)
        for attempt in range(tries):
            request = client.build_request(
                method, url, json=json, content=content, files=files, data=data,
                headers={**auth, **(headers or {})}, params=params, timeout=self._timeout,
            )  # fmt: skip
            secrets = self._secrets
            if signer is not None:
                secrets += signer(request)
            elif self.wire.sign is not None:
                secrets += self.wire.sign(request, self.model, self.options, self._api_key)
            try:
                response = await client.send(request)
                await response.aread()
            except httpx.HTTPError as exc:
                if attempt + 1 < tries:
                    await anyio.sleep(_BACKOFF * 2**attempt)
                    continue
                text = redact(f"{type(exc).__name__}: {exc}", secrets)
                raise BatchHTTPError("network", None, f"{method} {_where(url)}: {text}") from None
            if response.status_code in ok:
                return response
            retryable = response.status_code == 429 or response.status_code >= 500
            if retryable and attempt + 1 < tries:
                await anyio.sleep(_BACKOFF * 2**attempt)
                continue
            raise _http_error(method, url, response, secrets)
        raise AssertionError("unreachable")  # pragma: no cover


_MAX_URL = 8192


def _check_url(method: str, url: str) -> None:
    """Refuse a URL a vendor's value has bent: a path segment `.` or `..` (an id of `..`
    quoted into a path would move the request to another endpoint once normalized), a
    control character, or a URL longer than any endpoint needs. Nothing is sent."""
    path = urlsplit(url).path
    bent = any(seg in (".", "..") for seg in unquote(path).split("/"))
    if bent or len(url) > _MAX_URL or any(ord(c) < 0x20 or c == "\x7f" for c in url):
        shown = url[:120].encode("ascii", "backslashreplace").decode()
        raise BatchHTTPError(
            "protocol", None, f"{method} {shown}: a vendor id made this URL unsafe; not sent"
        )


def _where(url: str) -> str:
    return httpx.URL(url).copy_with(query=None).path[:200]


def _http_error(
    method: str, url: str, response: httpx.Response, secrets: tuple[str, ...]
) -> BatchHTTPError:
    """The error of a status the codec did not expect, read as a stream's HTTP error is:
    the vendor's error type and words (or a proxy page's text), the wait it asks for
    (`Retry-After`, `retry-after-ms`, a date, a Google `RetryInfo`), every secret redacted."""
    body = response.content[:_ERROR_BODY_LIMIT]
    vendor_type, words = vendor_error_text(body)
    words = words or response.text[:2000]
    status = response.status_code
    retry = retry_after_seconds(response.headers)
    if retry is None:
        retry = retry_delay_in_body(body)
    error = error_from_status(status, words, vendor_type=vendor_type, retry_after=retry)
    message = redact(f"{method} {_where(url)}: {status} {words}"[:1000], secrets)
    return BatchHTTPError(error.kind or "server", status, message, retry)
