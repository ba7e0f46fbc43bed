"""What the contract tests share: fixtures, replay through respx, and the `expect` check."""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
import stream_core.provider
from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)

# With the test helpers (a plain install writes Bedrock bodies without pytest); the kit's
# users import it from here as before.
from stream_core.testing._codec import block_summary
from stream_core.testing._frames import event_stream_frame as event_stream_frame

FIXTURES = Path(__file__).parent / "fixtures"
BASE_URL = "https://contract.test"
API_KEY = "sk-contract-test-key-0123456789"


@dataclass(frozen=True)
class Fixture:
    api: str
    name: str
    body: bytes
    meta: dict[str, Any]

    @property
    def expect(self) -> dict[str, Any]:
        return dict(self.meta.get("expect") or {})

    @property
    def headers(self) -> dict[str, str]:
        headers = dict(self.meta.get("headers") or {})
        headers.setdefault("content-type", "text/event-stream")
        return headers

    @property
    def call(self) -> dict[str, Any]:
        """How the recorded call was made, where it matters for reading the answer:
        `output_schema` (a JSON Schema) and `structured_output` (the model's mode)."""
        return dict(self.meta.get("call") or {})

    @property
    def streamed(self) -> bool:
        """False for a non-streamed JSON answer (read by `WireAPI.parse_response`)."""
        return not self.headers.get("content-type", "").startswith("application/json")

    def __repr__(self) -> str:  # shows in pytest ids and failures
        return f"{self.api}/{self.name}"


# --- what is under test -------------------------------------------------------------------
# The suite runs on these; the pytest plugin (`stream_core.testing.pytest_plugin`) sets them
# from `--stream-core-provider` / `--stream-core-fixtures` before the test modules load.

UNDER_TEST: list[str] | None = None
"""The APIs under test; None: every registered provider (the in-repo run)."""
FIXTURE_DIRS: list[Path] = [FIXTURES]
"""Folders holding one `<api>/` folder of recordings per API, searched in order."""


def apis_under_test() -> list[str]:
    if UNDER_TEST is not None:
        return list(UNDER_TEST)
    # The scripted `faux` provider (registered once a test builds a faux model) is checked
    # by its own tests: it has no vendor and so no recordings.
    return [e.api for e in stream_core.list_providers() if e.source != "stream_core.testing"]


def load_fixtures(api: str) -> list[Fixture]:
    out = []
    for base in FIXTURE_DIRS:
        folder = base / api
        if not folder.is_dir():
            continue
        for body in sorted(folder.glob("*.body")):
            meta_path = body.with_suffix(".json")
            meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
            out.append(Fixture(api, body.stem, body.read_bytes(), meta))
    return out


def fixture_folder(api: str) -> str:
    """Where a recording of `api` goes: the first fixtures folder (the in-repo
    `contract_tests/fixtures/`, or `--stream-core-fixtures` for a plugin), then `<api>/`."""
    base = FIXTURE_DIRS[0] if FIXTURE_DIRS else FIXTURES
    return f"{base}/{api}/"


PLAIN_TEXT = "a plain text answer (expect: stop_reason stop, content text blocks only)"
ERROR_EVENT = (
    "the vendor's error event before any content (expect: error_kind overloaded, "
    "rate_limit or server, content [])"
)
LENGTH_TOOL_CALL = (
    "a tool call cut by the output limit (expect: stop_reason length, the call truncated)"
)
JSON_ANSWER = (
    'the vendor\'s non-streamed JSON answer (its .json with "headers": '
    '{"content-type": "application/json"})'
)


def missing_recording(apis: Sequence[str], what: str) -> str:
    """The sentence a test without a recording to run on says: which file to add."""
    if not apis:
        return "no API under test (pass --stream-core-provider=MODULE)"
    return "; ".join(f"add {fixture_folder(api)}<name>.body + .json: {what}" for api in apis)


def cases_or_missing(cases: Sequence[Any], apis: Sequence[str], what: str) -> list[Any]:
    """Parameters for a test over recordings: the cases, or, when there are none, one
    skipped parameter whose reason names the recording to add (pytest's own skip says only
    "got empty parameter set", which names no file)."""
    if cases:
        return list(cases)
    reason = f"no recording to run on: {missing_recording(apis, what)}"
    return [pytest.param(None, id="no-recording", marks=pytest.mark.skip(reason=reason))]


def contract_model(api: str, **overrides: Any) -> Model:
    fields: dict[str, Any] = {
        "id": "contract-model",
        "name": "contract",
        "provider": "contract",
        "base_url": BASE_URL,
        "reasoning": True,
        "input": ["text", "image"],
    }
    return Model(api=api, **{**fields, **overrides})


def contract_context() -> Context:
    return Context(system_prompt="Be brief.", messages=[UserMessage(content="Hello")])


def options(**overrides: Any) -> StreamOptions:
    base: dict[str, Any] = {"api_key": API_KEY, "max_retries": 0, "retry_backoff": 0.001}
    base.update(overrides)
    return StreamOptions(**base)


# --- bodies and chunkings ---------------------------------------------------------------


def whole(body: bytes) -> list[bytes]:
    return [body]


def one_byte(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def split_at(body: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(body)})
    edges = [0, *points, len(body)]
    return [body[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def crlf(body: bytes) -> bytes:
    return body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


async def chunk_stream(chunks: Sequence[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def sse_response(
    chunks: Sequence[bytes] | Callable[[], AsyncIterator[bytes]],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    stream = chunks() if callable(chunks) else chunk_stream(chunks)
    return httpx.Response(
        status, headers=headers or {"content-type": "text/event-stream"}, content=stream
    )


# --- framings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Framing:
    """How the fault suite cuts, corrupts and pads a body of one framing, so every
    provider gets the same faults whatever its wire format."""

    media_type: str
    frames: Callable[[bytes], list[bytes]]
    """The body's frames as raw bytes, each whole (what a vendor writes per event)."""
    malformed: bytes
    """One frame whose payload is not JSON."""
    noise: bytes
    """Frames a reader must ignore: comments, keep-alives, unknown event types."""
    text_lines: bool = True
    """The body is text with line ends (CRLF replay applies)."""


def _sse_frames(body: bytes) -> list[bytes]:
    text = body.replace(b"\r\n", b"\n")
    return [e + b"\n\n" for e in text.split(b"\n\n") if e.strip()]


def _ndjson_frames(body: bytes) -> list[bytes]:
    return [line + b"\n" for line in body.replace(b"\r\n", b"\n").split(b"\n") if line.strip()]


def _event_stream_frames(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 12 <= len(body):
        (total,) = struct.unpack_from(">I", body, pos)
        if total < 16:
            break
        out.append(body[pos : pos + total])
        pos += total
    return out


FRAMINGS: dict[Any, Framing] = {
    stream_core.provider.SSEBytesDecoder: Framing(
        media_type="text/event-stream",
        frames=_sse_frames,
        malformed=b"data: {not json\n\n",
        noise=(
            b": keep-alive\n\n"
            b'event: vendor_future_event\ndata: {"type":"vendor_future_event","x":[1]}\n\n'
            b"retry: 3000\n\n"
        ),
    ),
    stream_core.provider.NDJSONBytesDecoder: Framing(
        media_type="application/x-ndjson",
        frames=_ndjson_frames,
        malformed=b"{not json\n",
        noise=b'\n{"vendor_future_field":[1]}\n',
    ),
    stream_core.provider.EventStreamDecoder: Framing(
        media_type="application/vnd.amazon.eventstream",
        frames=_event_stream_frames,
        malformed=event_stream_frame("contentBlockDelta", b"{not json"),
        noise=(
            event_stream_frame("vendorFutureEvent", b'{"x":[1]}')
            + event_stream_frame("contentBlockDelta", b"")
        ),
        text_lines=False,
    ),
}
"""Framing by decoder; a provider with a decoder of its own adds its row here."""


def framing(api: str) -> Framing:
    wire = stream_core.provider.get_provider(api).wire
    decoder = wire.decoder if wire is not None else stream_core.provider.SSEBytesDecoder
    return FRAMINGS[decoder]


def vendor_response(
    api: str,
    chunks: Sequence[bytes] | Callable[[], AsyncIterator[bytes]],
    *,
    status: int = 200,
) -> httpx.Response:
    """A streamed answer labelled with the API's own content type."""
    return sse_response(chunks, status=status, headers={"content-type": framing(api).media_type})


class ChunkIterator:
    """A body's chunks as an async iterator object. Unlike an async generator, one that a
    stream leaves unfinished (it stopped at its terminal event or a protocol error) is not
    reported by trio's finalizer as a resource leak."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = iter(chunks)

    def __aiter__(self) -> ChunkIterator:
        return self

    async def __anext__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None


def replay_response(
    chunks: Sequence[bytes], headers: dict[str, str] | None = None
) -> httpx.Response:
    """A 200 streaming `chunks`, safe to leave unfinished under trio."""
    return httpx.Response(
        200,
        headers=headers or {"content-type": "text/event-stream"},
        content=ChunkIterator(chunks),
    )


def text_case(api: str) -> Fixture:
    """The smallest streamed recording of `api` that ends normally with text (thinking may
    come first): what the fault and transport tests cut, stall and splice. Recordings of
    four events or more are preferred, so half of one, or all but two, ends before the
    terminal event (a Gemini answer may be two chunks). Recordings made with a `call` (an
    output schema) are left out: the tests that replay this one make a plain call."""
    cases = [
        f
        for f in load_fixtures(api)
        if f.expect.get("stop_reason") == "stop"
        and not f.call
        and f.streamed
        and not f.expect.get("content_partial")
        and any(b["type"] == "text" for b in f.expect.get("content", []))
        and all(b["type"] in ("text", "thinking") for b in f.expect["content"])
    ]
    assert cases, f"{api}: needs a recording: {missing_recording([api], PLAIN_TEXT)}"
    long_enough = [f for f in cases if len(framing(api).frames(f.body)) >= 4]
    return min(long_enough or cases, key=lambda f: len(f.body))


# --- running a provider -----------------------------------------------------------------


@dataclass
class Run:
    events: list[AssistantStreamEvent]
    message: AssistantMessage
    calls: int
    requests: list[httpx.Request]


async def run_provider(
    api: str,
    responses: Sequence[httpx.Response] | Callable[[httpx.Request], Any],
    *,
    context: Context | None = None,
    opts: StreamOptions | None = None,
    model: Model | None = None,
) -> Run:
    """Stream one message with the vendor replaced by `responses` (one per attempt)."""
    model = model or contract_model(api)
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as mock:
        side_effect: Any = responses if callable(responses) else list(responses)
        route = mock.route(host="contract.test").mock(side_effect=side_effect)
        events: list[AssistantStreamEvent] = []
        async with stream_core.stream(model, context or contract_context(), opts or options()) as s:
            async for event in s:
                events.append(event)
            message = await s.result()
        return Run(events, message, route.call_count, [c.request for c in route.calls])


def fresh_limiter() -> None:
    """Forget what earlier replays taught the limiter: each recording is its own vendor
    session, and the rate limits its headers carry (the recorder's account, its resets
    long past) say nothing of the next one's."""
    stream_core.configure_limits()


def replay(fixture: Fixture, chunks: Sequence[bytes], **option_overrides: Any) -> Run:
    fresh_limiter()
    response = sse_response(
        chunks, status=int(fixture.meta.get("status") or 200), headers=fixture.headers
    )

    call = fixture.call
    tools = fixture.meta.get("request_tools")
    if tools and "on_payload" not in option_overrides:
        # The vendor-run tools the recorded request asked for (web search, code
        # execution): an answer to them may hold several sampling rounds of input.
        def add_tools(payload: dict[str, Any], model: Model) -> dict[str, Any]:
            return {**payload, "tools": [*(payload.get("tools") or []), *tools]}

        option_overrides["on_payload"] = add_tools
    mode = call.pop("structured_output", None)
    model = contract_model(fixture.api, structured_output=mode) if mode else None

    async def main() -> Run:
        return await run_provider(
            fixture.api, [response], opts=options(**call, **option_overrides), model=model
        )

    return anyio.run(main)


# --- expect -------------------------------------------------------------------------------


def check_expect(message: AssistantMessage, expect: dict[str, Any]) -> None:
    """Compare a final message with a fixture's `expect` (fixtures/INDEX.md, "Reading expect")."""
    if "stop_reason" in expect:
        assert message.stop_reason == expect["stop_reason"], (
            f"stop_reason {message.stop_reason!r} (error: {message.error}), "
            f"expected {expect['stop_reason']!r}"
        )
    if "raw_stop_reason" in expect:
        assert message.raw_stop_reason == expect["raw_stop_reason"]
    if "error_kind" in expect:
        assert message.error is not None, "expected an error"
        assert message.error.kind == expect["error_kind"], message.error
    usage = message.usage.model_dump()
    for key, value in (expect.get("usage") or {}).items():
        hint = ""
        if value and usage[key] == 2 * value:
            hint = " (twice the count: a cumulative snapshot added instead of set?)"
        assert usage[key] == value, f"usage.{key} = {usage[key]}, expected {value}{hint}"
    if "output" in expect:
        assert message.output == expect["output"], (
            f"output {message.output!r} (error: {message.error}), expected {expect['output']!r}"
        )
    if "output_mode" in expect:
        assert message.output_mode == expect["output_mode"], message.output_mode
    if "content" in expect:
        got = [_summary(b) for b in message.content]
        want = expect["content"]
        if expect.get("content_partial"):
            _assert_subsequence(got, want)
        else:
            assert len(got) == len(want), f"{len(got)} blocks, expected {len(want)}: {got}"
            for i, (g, w) in enumerate(zip(got, want, strict=False)):
                _assert_block(i, g, w)


def _summary(block: Any) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text, "citations": len(block.citations or ())}
    if isinstance(block, ThinkingContent):
        return {"type": "thinking", "text": block.thinking, "redacted": block.redacted}
    if isinstance(block, ToolCall):
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
            "truncated": block.truncated,
        }
    # server_tool_call {id, name, kind}, server_tool_result {call_id}, file,
    # approval_request {id}, vendor {vendor_type}: what an expectation may name.
    return block_summary(block)


def _matches(got: dict[str, Any], want: dict[str, Any]) -> bool:
    try:
        _assert_block(0, got, want)
    except AssertionError:
        return False
    return True


def _assert_block(i: int, got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["type"] == want["type"], f"block {i}: {got['type']}, expected {want['type']}"
    if want["type"] in ("text", "thinking"):
        if "text" in want:
            assert got["text"] == want["text"], f"block {i}: text differs"
        if "citations" in want:
            assert got.get("citations") == want["citations"], (
                f"block {i}: {got.get('citations')} citations, expected {want['citations']}"
            )
        return
    if want["type"] != "tool_call":
        for key, value in want.items():
            assert got.get(key) == value, (
                f"block {i} ({want['type']}): {key} {got.get(key)!r}, expected {value!r}"
            )
        return
    for key in ("id", "name"):
        if key in want:
            assert got[key] == want[key], f"block {i}: {key} {got[key]!r}, expected {want[key]!r}"
    if want.get("truncated"):
        assert got["truncated"], f"block {i}: tool call should be truncated"
    else:
        assert not got["truncated"], f"block {i}: tool call unexpectedly truncated"
        if "arguments" in want:
            assert got["arguments"] == want["arguments"], f"block {i}: arguments differ"


def _assert_subsequence(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    pos = 0
    for w in want:
        while pos < len(got) and not _matches(got[pos], w):
            pos += 1
        assert pos < len(got), f"expected block {w} not found in order in {got}"
        pos += 1
