"""Recorded vendor bodies served by an in-memory client: `StreamOptions(client=...)`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx

Recording = str | Path | bytes | Any
"""A `.body` path (its `.json` beside it), bytes, or a `Synthesized` from `vendor_bytes`."""


def _media_type(body: bytes) -> str:
    head = body.lstrip()[:1]
    if head == b"{":
        return "application/x-ndjson"
    if head and head not in b":edir":  # SSE lines start with a field name or a comment
        return "application/vnd.amazon.eventstream"
    return "text/event-stream"


def load_recording(recording: Recording) -> tuple[bytes, dict[str, Any]]:
    """(body, metadata): a `.body` file with its `.json` beside it, bytes alone, or what
    `vendor_bytes` made (its body and metadata, the status included)."""
    if isinstance(recording, bytes):
        return recording, {}
    made = getattr(recording, "meta", None)
    if isinstance(made, dict) and isinstance(getattr(recording, "body", None), bytes):
        return recording.body, made  # type: ignore[union-attr]
    path = Path(recording)
    if path.suffix != ".body" and path.with_suffix(".body").is_file():
        path = path.with_suffix(".body")
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text("utf-8")) if meta_path.is_file() else {}
    return path.read_bytes(), meta


def chunked(body: bytes, size: int | None) -> list[bytes]:
    if not size:
        return [body]
    return [body[i : i + size] for i in range(0, len(body), size)]


class _Served:
    def __init__(
        self,
        recordings: Sequence[Recording],
        chunk_size: int | None,
        status: int | None,
        headers: dict[str, str] | None,
        delay: float,
        repeat: bool,
    ) -> None:
        self.answers = [load_recording(r) for r in recordings]
        self.chunk_size = chunk_size
        self.status = status
        self.headers = headers
        self.delay = delay
        self.repeat = repeat
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        n = len(self.requests)
        self.requests.append(request)
        if n >= len(self.answers) and not self.repeat:
            text = f"no recording for request {n + 1}"
            error = json.dumps({"error": {"type": "replay_exhausted", "message": text}})
            return httpx.Response(500, headers={"content-type": "application/json"}, content=error)
        body, meta = self.answers[min(n, len(self.answers) - 1)]
        headers = {"content-type": _media_type(body), **(meta.get("headers") or {})}
        headers.update(self.headers or {})
        status = self.status or int(meta.get("status") or 200)
        return httpx.Response(status, headers=headers, content=self._chunks(body))

    async def _chunks(self, body: bytes) -> AsyncIterator[bytes]:
        for piece in chunked(body, self.chunk_size):
            if self.delay:
                await anyio.sleep(self.delay)
            yield piece


class ReplayClient(httpx.AsyncClient):
    """An `httpx.AsyncClient` answering from recordings; `.requests` holds what it got."""

    def __init__(self, served: _Served) -> None:
        super().__init__(transport=httpx.MockTransport(served))
        self._served = served

    @property
    def requests(self) -> list[httpx.Request]:
        return self._served.requests


def replay_client(
    recording: Recording,
    *,
    chunk_size: int | None = None,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    delay: float = 0.0,
) -> ReplayClient:
    """A client that answers every request with one recording (a path to `NAME.body`,
    whose `NAME.json` gives status and headers, or the body's bytes), in pieces of
    `chunk_size` bytes. Pass it as `StreamOptions(client=...)`; it never opens a socket."""
    return ReplayClient(_Served([recording], chunk_size, status, headers, delay, repeat=True))


def replay_sequence(
    recordings: Sequence[Recording],
    *,
    chunk_size: int | None = None,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    delay: float = 0.0,
) -> ReplayClient:
    """A client that answers the n-th request with the n-th recording (a multi-turn
    conversation); a request past the end gets a 500 error naming it."""
    if not recordings:
        raise ValueError("replay_sequence needs at least one recording")
    return ReplayClient(_Served(list(recordings), chunk_size, status, headers, delay, repeat=False))
