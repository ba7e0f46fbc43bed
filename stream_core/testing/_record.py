"""`stream-core record`: one live call written as a recording in the fixture format.

The response body is teed off the transport as it arrives, decoded of any
content-encoding, scrubbed of every fragment of the call's secrets (`_redact`), and written
as `NAME.body`, with `NAME.json` holding the safe headers and an `expect` computed from
what the written body replays to. A body that would still hold a fragment is not written.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

import httpx

from .._models import Model
from .._options import StreamOptions
from .._pipeline.stream import AssistantStream
from .._registry import stream
from .._types import (
    AssistantMessage,
    Context,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from ._redact import RecordingLeak, decode_body, leaked, scrub_fragments, scrub_loosely

SAFE_HEADERS = frozenset({"content-type", "retry-after", "retry-after-ms"})
"""Response headers a recording keeps; everything else (cookies, account and org ids,
request ids that can be traced to an account) is dropped."""

SCRUBBED = b"[scrubbed]"

# Key-shaped strings of the major vendors, bearer tokens, AWS access keys and account ids
# inside ARNs, JWT-like tokens. Deliberately broad: a recording is data, not evidence.
_SECRET_PATTERNS = re.compile(
    rb"sk-[A-Za-z0-9_-]{16,}"
    rb"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{12,}"
    rb"|A(?:KIA|SIA)[0-9A-Z]{16}"
    rb"|gsk_[A-Za-z0-9]{20,}"
    rb"|AIza[0-9A-Za-z_-]{30,}"
    rb"|xai-[A-Za-z0-9]{20,}"
    rb"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
)
_ARN_ACCOUNT = re.compile(rb"(arn:aws[a-z-]*:[a-z0-9-]*:[a-z0-9-]*:)\d{12}")


def scrub(data: bytes, secrets: tuple[str, ...] = ()) -> bytes:
    """`data` with every given secret and anything key-shaped replaced."""
    for secret in secrets:
        if secret:
            data = data.replace(secret.encode(), SCRUBBED)
    data = _SECRET_PATTERNS.sub(SCRUBBED, data)
    return _ARN_ACCOUNT.sub(rb"\g<1>000000000000", data)


class _TeeStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink += chunk
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class TeeTransport(httpx.AsyncBaseTransport):
    """A transport keeping the last response's status, headers and raw body."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()
        self.status = 0
        self.headers: httpx.Headers = httpx.Headers()
        self.body = bytearray()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        self.status = response.status_code
        self.headers = response.headers
        self.body = bytearray()  # a retry replaces what an earlier attempt sent
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TeeStream(response.stream, self.body),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def expect_of(message: AssistantMessage, generated_ids: Collection[str] = ()) -> dict[str, Any]:
    """The fixture `expect` a message satisfies (fixtures/INDEX.md, "Reading expect").

    A tool call's `id` is listed only when the vendor sent it: `generated_ids` are the ids
    stream-core made up (Gemini sends none; a missing, empty or repeated id), which a
    fixture does not pin."""
    expect: dict[str, Any] = {"stop_reason": message.stop_reason}
    if message.raw_stop_reason is not None:
        expect["raw_stop_reason"] = message.raw_stop_reason
    if message.error is not None:
        expect["error_kind"] = message.error.kind
    u = message.usage
    expect["usage"] = {
        "input": u.input,
        "output": u.output,
        "cache_read": u.cache_read,
        "cache_write": u.cache_write,
        "reasoning": u.reasoning,
        "total_tokens": u.total_tokens,
    }
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            content.append({"type": "thinking", "text": block.thinking})
        elif isinstance(block, ToolCall):
            call: dict[str, Any] = {"type": "tool_call"}
            if block.id not in generated_ids:
                call["id"] = block.id
            call["name"] = block.name
            if block.truncated:
                call["truncated"] = True
            else:
                call["arguments"] = block.arguments
            content.append(call)
    expect["content"] = content
    return expect


async def record(
    model: Model,
    context: Context,
    options: StreamOptions,
    name: Path,
    *,
    api_key: str | None = None,
) -> tuple[AssistantMessage, Path, Path]:
    """Stream one answer and write `name.body` / `name.json`; returns (message, paths)."""
    tee = TeeTransport()
    async with httpx.AsyncClient(transport=tee, timeout=None) as client:
        opts = _with_client(options, client)
        s = stream(model, context, opts)
        message = await s.result()
        generated = _generated_ids(s)
    secrets = tuple(
        dict.fromkeys(x for x in (api_key, options.api_key, *getattr(s, "_secrets", ())) if x)
    )
    # Stored decoded: a gzip body would hide an echoed key from every check below.
    body = decode_body(bytes(tee.body), tee.headers.get("content-encoding", ""))
    body = scrub_fragments(scrub(body, secrets), secrets)
    replay_headers = {
        k: v
        for k, v in tee.headers.items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    }
    # The expect is what the written body replays to; the replay also shows a key split
    # across deltas, which no single JSON string holds.
    replayed, generated = await _replay(model, context, options, tee.status, replay_headers, body)
    if leaked(replayed.model_dump_json(), secrets):
        body = scrub_loosely(body, secrets)
        replayed, generated = await _replay(
            model, context, options, tee.status, replay_headers, body
        )
    if leaked(body, secrets) or leaked(replayed.model_dump_json(), secrets):
        raise RecordingLeak(
            "the response holds a fragment of the call's API key or credential that could "
            "not be scrubbed; nothing was written"
        )
    headers = {k.lower(): v for k, v in tee.headers.items() if k.lower() in SAFE_HEADERS}
    meta = {
        "name": name.name,
        "api": model.api,
        "vendor": model.provider,
        "model": model.id,
        "status": tee.status,
        "headers": headers,
        "source": {
            "repo": None,
            "path": None,
            "commit": None,
            "licence": "recorded by the user",
            "recorded": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tool": "stream-core record",
        },
        "licence": "recorded by the user",
        "realism": "genuine (a live call)",
        "framing": "as received",
        "notes": [
            "recorded with `stream-core record`; key-shaped strings, auth values and "
            "account ids scrubbed, headers limited to " + ", ".join(sorted(SAFE_HEADERS)),
        ],
        "expect": expect_of(replayed, generated),
    }
    text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
    meta_bytes = scrub_fragments(scrub(text.encode(), secrets), secrets)
    if leaked(meta_bytes, secrets):
        raise RecordingLeak(
            "the recording's metadata holds a fragment of the call's API key or credential "
            "that could not be scrubbed; nothing was written"
        )
    body_path = name.with_name(name.name + ".body")
    meta_path = name.with_name(name.name + ".json")
    name.parent.mkdir(parents=True, exist_ok=True)
    body_path.write_bytes(body)
    meta_path.write_bytes(meta_bytes)
    return message, body_path, meta_path


async def _replay(
    model: Model,
    context: Context,
    options: StreamOptions,
    status: int,
    headers: dict[str, str],
    body: bytes,
) -> tuple[AssistantMessage, frozenset[str]]:
    """The message the scrubbed body makes, and the tool-call ids it made up."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        opts = dataclasses.replace(
            options, client=client, max_retries=0, api_key="replay-not-a-key", headers={}
        )
        s = stream(model, context, opts)
        return await s.result(), _generated_ids(s)


def _generated_ids(s: AssistantStream) -> frozenset[str]:
    """The tool-call ids the stream's assembler made up (none for a stream of another
    kind: a provider that does not use the shared pipeline)."""
    asm = getattr(s, "_asm", None)
    return frozenset(getattr(asm, "_generated_ids", ()))


def _with_client(options: StreamOptions, client: httpx.AsyncClient) -> StreamOptions:
    return dataclasses.replace(options, client=client)
