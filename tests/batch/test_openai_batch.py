"""OpenAI Batch, Chat Completions and Responses, from the user's side: a batch of scripted
turns answered by the fake vendor gives the messages `stream()` gives for the same script
(content, usage, stop reason, structured output; the cost at half), each line is the
streamed request without its streaming fields, errored, expired and cancelled requests are
messages with their kind, a job killed after its create finds its batch by tag, a full
queue is a `rate_limit`, and hostile result lines never raise out.

The codec's own functions are driven by a small session of this file's (`_Session`, the
`BatchSession` protocol over httpx) against the same fake vendor.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    ErrorKind,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
    complete,
)
from stream_core.batch import BatchRequest, BatchResult, submit, vendor_batches
from stream_core.provider import (
    BatchHTTPError,
    BatchPart,
    BatchSettings,
    RawResult,
    WireAPI,
    error_from_status,
    get_provider,
    plan,
    read_whole,
    vendor_error_fields,
)
from stream_core.providers import _openai_batch as codec
from stream_core.providers import _openai_batch_shapes as shapes
from stream_core.providers._batch_lines import jsonl
from stream_core.providers._chat_encode import ERRORS, error_body
from stream_core.testing import (
    FakeVendor,
    fake_vendor,
    faux_content,
    faux_error,
    faux_text,
    faux_tool_call,
)
from stream_core.testing import _batch_routes_openai as routes
from stream_core.testing._batch_serve import BatchBackend, HTTPAnswer, HTTPAsk, route

CHAT, RESPONSES = "openai-completions", "openai-responses"
APIS = (CHAT, RESPONSES)
USAGE = Usage(input=120, output=30, cache_read=40)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
TOOL = stream_core.Tool(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _model(api: str, model_id: str = "gpt-4o-mini") -> Model:
    return stream_core.get_model("openai", model_id, api=api)


def _options(fake: FakeVendor, **more: Any) -> StreamOptions:
    return StreamOptions(base_url=fake.url + "/v1", api_key="sk-test", max_retries=0, **more)


def _ask(text: str = "Weather in Paris?", tools: bool = False) -> Context:
    found = [TOOL] if tools else None
    return Context(messages=[UserMessage(content=text)], tools=found)


CASES: dict[str, tuple[Any, str, dict[str, Any], bool]] = {
    "text": (faux_text("It is 21 degrees in Paris.", usage=USAGE), "gpt-4o-mini", {}, False),
    "tool_call": (
        faux_tool_call("get_weather", {"city": "Paris"}, text="Checking.", usage=USAGE),
        "gpt-4o-mini",
        {"tool_choice": "auto"},
        True,
    ),
    "structured": (
        faux_text('{"city": "Paris", "temp": 21}', usage=USAGE),
        "gpt-4o-mini",
        {"output_schema": SCHEMA},
        False,
    ),
    "reasoning": (
        faux_content(
            [ThinkingContent(thinking="Paris in June is mild."), TextContent(text="21 degrees.")],
            usage=Usage(input=80, output=60, reasoning=45),
        ),
        "gpt-5-mini",
        {"reasoning": "low", "max_tokens": 2000},
        False,
    ),
}


def _same(batch: AssistantMessage, streamed: AssistantMessage) -> None:
    """The batch answer is the streamed one: content, usage, stop reason, output; the
    cost half."""
    assert batch.error is None, batch.error
    assert batch.stop_reason == streamed.stop_reason
    assert [type(b).__name__ for b in batch.content] == [type(b).__name__ for b in streamed.content]
    for got, want in zip(batch.content, streamed.content, strict=True):
        if isinstance(want, TextContent):
            assert isinstance(got, TextContent) and got.text == want.text
        elif isinstance(want, ThinkingContent):
            assert isinstance(got, ThinkingContent) and got.thinking == want.thinking
        else:
            assert isinstance(got, ToolCall) and isinstance(want, ToolCall)
            assert (got.id, got.name, got.arguments) == (want.id, want.name, want.arguments)
    assert batch.output == streamed.output
    for name in ("input", "output", "cache_read", "cache_write", "reasoning", "total_tokens"):
        assert getattr(batch.usage, name) == getattr(streamed.usage, name), name
    assert streamed.usage.cost is not None and batch.usage.cost is not None
    assert streamed.usage.cost.total > 0
    assert batch.usage.cost.total == pytest.approx(streamed.usage.cost.total / 2)


def _streamless(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}


# --- end to end, through stream_core.batch -------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_batch_answers_as_the_stream_does(tmp_path: Path, api: str, case: str) -> None:
    turn, model_id, extra, tools = CASES[case]
    model = _model(api, model_id)
    with fake_vendor(scenarios={model.id: [turn, turn, turn]}, batch_delay=0.05) as fake:
        options = _options(fake, **extra)
        ask = _ask(tools=tools)

        async def run() -> tuple[AssistantMessage, list[BatchResult]]:
            streamed = await complete(model, ask, options)
            requests = [BatchRequest(f"q{i}", model, ask, options) for i in range(2)]
            job = await submit(requests, store=tmp_path, name="fidelity")
            return streamed, await job.collect(interval=0.05)

        streamed, results = anyio.run(run)
        (batch,) = fake.batches.batches.values()
        sent = fake.requests[0].body
        assert fake.batches.files == {}  # input, output and error files deleted once read
    assert [r.outcome for r in results] == ["succeeded", "succeeded"]
    for r in results:
        _same(r.message, streamed)
        assert r.batch_id == batch.id
    # Each line is the streamed request, less its streaming fields, nothing else.
    assert [payload for _, _, _, payload in batch.requests] == [_streamless(sent)] * 2
    assert "stream" in sent and all("stream" not in p for *_, p in batch.requests)
    assert batch.meta["endpoint"] == codec.ENDPOINTS[api]


@pytest.mark.parametrize("api", APIS)
def test_errored_requests_are_messages_with_their_kind(tmp_path: Path, api: str) -> None:
    model = _model(api)
    kinds: list[ErrorKind] = ["invalid_request", "context_overflow", "rate_limit", "server"]
    script = [faux_text("fine", usage=USAGE)] + [faux_error(k, f"failed: {k}") for k in kinds]
    with fake_vendor(scenarios={model.id: script}, batch_delay=0.05) as fake:
        options = _options(fake)

        async def run() -> list[BatchResult]:
            requests = [BatchRequest(f"q{i}", model, _ask(), options) for i in range(5)]
            job = await submit(requests, store=tmp_path, name="errors")
            return await job.collect(interval=0.05)

        results = anyio.run(run)
    assert [r.outcome for r in results] == ["succeeded"] + ["errored"] * 4
    assert results[0].message.text() == "fine"
    for r, kind in zip(results[1:], kinds, strict=True):
        assert r.message.stop_reason == "error" and r.message.content == []
        assert r.message.error is not None and r.message.error.kind == kind
        assert f"failed: {kind}" in r.message.error.message


@pytest.mark.parametrize("api", APIS)
def test_expired_requests_are_messages_and_run_again(tmp_path: Path, api: str) -> None:
    model = _model(api)
    script = [faux_text(f"answer {i}", usage=USAGE) for i in range(3)]
    with fake_vendor(scenarios={model.id: script}, batch_delay=0.3, batch_expiry=0.05) as fake:
        fake.batches.expire_after = 1
        options = _options(fake)

        async def run() -> tuple[list[BatchResult], list[BatchResult], int]:
            requests = [BatchRequest(f"q{i}", model, _ask(), options) for i in range(3)]
            job = await submit(requests, store=tmp_path, name="expiry")
            first = await job.collect(interval=0.05)
            fake.batches.expiry = None
            fake.batches.delay = 0.05
            again = await job.resubmit_expired()
            return first, await job.collect(interval=0.05), again

        first, second, again = anyio.run(run)
        words = [shapes.EXPIRED, shapes.COMPLETED]
        said = [shapes.read_status(_object(fake, b)).vendor_state for b in fake.batches.batches]
    assert [r.outcome for r in first] == ["succeeded", "expired", "expired"]
    for r in first[1:]:
        assert r.message.error is not None and r.message.error.kind == "expired"
        assert r.message.stop_reason == "error"
    assert again == 2
    assert [r.outcome for r in second] == ["succeeded"] * 3
    assert [r.message.text() for r in second] == ["answer 0", "answer 1", "answer 2"]
    assert said == words


def _object(fake: FakeVendor, batch_id: str) -> Any:
    return httpx.get(f"{fake.url}/v1/batches/{batch_id}").json()


@pytest.mark.parametrize("api", APIS)
def test_a_cancelled_batch_gives_each_request_back_cancelled(tmp_path: Path, api: str) -> None:
    model = _model(api)
    with fake_vendor(scenarios={model.id: ["never"] * 2}, batch_delay=30) as fake:
        options = _options(fake)

        async def run() -> list[BatchResult]:
            requests = [BatchRequest(f"q{i}", model, _ask(), options) for i in range(2)]
            job = await submit(requests, store=tmp_path, name="cancel")
            await job.cancel()
            return await job.collect(interval=0.05)

        results = anyio.run(run)
        (batch_id,) = fake.batches.batches
        assert _object(fake, batch_id)["status"] == shapes.CANCELLED
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    for r in results:
        assert r.message.error is not None and r.message.error.kind == "aborted"


def test_a_kill_after_the_create_finds_the_batch_by_its_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model(CHAT)

    class Killed(BaseException):
        pass

    real = codec.BATCH.submit

    async def create_then_die(session: Any, part: BatchPart) -> str:
        await real(session, part)
        raise Killed  # the id never reached the journal

    with fake_vendor(scenarios={model.id: ["one", "two"]}, batch_delay=0.05) as fake:
        options = _options(fake)
        requests = [BatchRequest(f"q{i}", model, _ask(), options) for i in range(2)]
        monkeypatch.setattr(
            codec, "BATCH", dataclasses.replace(codec.BATCH, submit=create_then_die)
        )
        with pytest.raises(Killed):
            anyio.run(lambda: submit(requests, store=tmp_path, name="crash"))
        monkeypatch.undo()

        async def restart() -> list[BatchResult]:
            job = await submit(requests, store=tmp_path, name="crash")
            return await job.collect(interval=0.05)

        results = anyio.run(restart)
        assert fake.batches.created == 1
        assert fake.batches.files == {}
    assert [r.message.text() for r in results] == ["one", "two"]


def test_the_account_lists_its_batches_newest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model(CHAT)
    monkeypatch.setattr(codec, "_PAGE", 2)  # three pages for five batches
    with fake_vendor(scenarios={model.id: ["x"] * 5}, batch_delay=0.05) as fake:
        session = _Session(model, fake)

        async def run() -> tuple[list[str], list[str]]:
            made = [
                await codec.BATCH.submit(session, _part(model, fake, f"t{i}")) for i in range(5)
            ]
            here = model.model_copy(update={"base_url": fake.url + "/v1"})
            listed = [s.id for s in await vendor_batches(here, options=_options(fake), limit=10)]
            return made, listed

        made, listed = anyio.run(run)
    assert listed == made[::-1]


def test_find_names_only_this_parts_batches() -> None:
    model = _model(RESPONSES)
    with fake_vendor(scenarios={model.id: ["x"] * 4}, batch_delay=5) as fake:
        session = _Session(model, fake)
        mine, other = _part(model, fake, "scmine"), _part(model, fake, "scother")

        async def run() -> tuple[list[str], list[str], list[str], str]:
            since = time.time() - 1
            made = await codec.BATCH.submit(session, mine)
            await codec.BATCH.submit(_Session(model, fake), other)
            found = await codec.BATCH.find(session, mine, since)
            later = await codec.BATCH.find(session, mine, time.time() + 3600)
            fresh = await codec.BATCH.find(session, _part(model, fake, "scnone"), since)
            return found, later, fresh, made

        found, later, fresh, made = anyio.run(run)
    assert found == [made] and later == [] and fresh == []


def test_a_full_queue_is_a_rate_limit_and_never_adopted() -> None:
    model = _model(CHAT)
    with fake_vendor(scenarios={model.id: ["x"] * 4}, batch_delay=5) as fake:
        fake.batches.queue_limit = 3
        part = _part(model, fake, "scfull", n=2)
        session = _Session(model, fake)

        async def run() -> tuple[str, BatchHTTPError, list[str]]:
            first = await codec.BATCH.submit(_Session(model, fake), _part(model, fake, "ok", n=2))
            with pytest.raises(BatchHTTPError) as refused:
                await codec.BATCH.submit(session, part)
            return first, refused.value, await codec.BATCH.find(session, part, time.time() - 60)

        first, refused, found = anyio.run(run)
        failed = [b for b in fake.batches.batches if b != first]
        said = shapes.read_status(_object(fake, failed[0]))
    assert refused.kind == "rate_limit"
    assert shapes.QUEUE_FULL_CODE in refused.message
    assert found == []  # a batch the queue refused is never this part's batch
    assert said.state == "failed" and shapes.queue_full(said)
    assert fake.batches.created == 1


def test_the_engine_learns_a_full_queue(tmp_path: Path) -> None:
    model = _model(RESPONSES)
    with fake_vendor(scenarios={model.id: ["x"] * 4}, batch_delay=5) as fake:
        fake.batches.queue_limit = 1
        options = _options(fake)
        requests = [BatchRequest(f"q{i}", model, _ask(), options) for i in range(2)]
        with pytest.raises(BatchHTTPError) as refused:
            anyio.run(lambda: submit(requests, store=tmp_path, name="full"))
        asked = len(fake.batches.batches)
        with pytest.raises(BatchHTTPError) as again:
            anyio.run(lambda: submit(requests, store=tmp_path, name="full"))
        assert len(fake.batches.batches) == asked  # the pause was learned: not asked again
    assert refused.value.kind == again.value.kind == "rate_limit"


@route("POST", r"/refusing/v1/files")
def _refusing_upload(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    return routes._upload(backend, ask)


@route("POST", r"/refusing/v1/batches")
def _refusing_create(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    status, body = error_body("rate_limit", "Too many batches are being created; slow down")
    return HTTPAnswer.of(status, body, **{"retry-after": "7"})


def test_a_create_refused_with_a_429_is_a_rate_limit_with_its_retry_after(tmp_path: Path) -> None:
    model = _model(CHAT)
    with fake_vendor(scenarios={model.id: ["x"]}) as fake:
        options = StreamOptions(base_url=fake.url + "/refusing/v1", api_key="sk-test")
        requests = [BatchRequest("q0", model, _ask(), options)]
        with pytest.raises(BatchHTTPError) as refused:
            anyio.run(lambda: submit(requests, store=tmp_path, name="refused"))
        assert fake.batches.batches == {}
    error = refused.value
    assert (error.kind, error.status, error.retry_after) == ("rate_limit", 429, 7.0)
    assert "sk-test" not in error.message


_NOT_JSON = {"junk": b"<html>busy</html>", "deep": b"[" * 100_000 + b"]" * 100_000}


@route("GET", r"/(?P<how>junk|deep)/v1/batches/(?P<id>[^/]+)")
def _garbled_status(backend: BatchBackend, ask: HTTPAsk) -> HTTPAnswer:
    return HTTPAnswer(200, _NOT_JSON[ask.match["how"]], media_type="application/json")


@pytest.mark.parametrize("how", sorted(_NOT_JSON))
def test_a_status_answer_that_is_not_json_is_a_protocol_error(how: str) -> None:
    """Junk, or JSON nested past the parser's depth (a `RecursionError` once escaped)."""
    model = _model(CHAT)
    with fake_vendor(scenarios={model.id: ["x"]}) as fake:
        session = _Session(model, fake)
        session.model = session.model.model_copy(update={"base_url": f"{fake.url}/{how}/v1"})
        with pytest.raises(BatchHTTPError) as said:
            anyio.run(codec.BATCH.status, session, "batch_1")
    assert said.value.kind == "protocol" and "not JSON" in said.value.message


def test_a_file_the_vendor_cannot_read_fails_the_batch_naming_the_line() -> None:
    model = _model(CHAT)
    with fake_vendor(scenarios={model.id: ["x"]}) as fake:
        body = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", '
        body += b'"body": {"model": "gpt-4o-mini"}}\nnot json\n'
        upload = httpx.post(
            f"{fake.url}/v1/files", files={"file": ("in.jsonl", body)}, data={"purpose": "batch"}
        )
        made = {"input_file_id": upload.json()["id"], "endpoint": "/v1/chat/completions"}
        created = httpx.post(f"{fake.url}/v1/batches", json={**made, "completion_window": "24h"})
        wrong = httpx.post(f"{fake.url}/v1/batches", json={**made, "completion_window": "1h"})
        status = shapes.read_status(_object(fake, created.json()["id"]))
    assert shapes.read_status(created.json()).state == "submitted"
    assert status.state == "failed" and status.error is not None and "line 2" in status.error
    assert wrong.status_code == 400


# --- the codec against the fake vendor, through a session of this file's -----------------


class _Session:
    """`BatchSession` over httpx, with the engine's error kinds (as small as it can be)."""

    def __init__(self, model: Model, fake: FakeVendor) -> None:
        self.model = model.model_copy(update={"base_url": fake.url + "/v1"})
        self.settings = BatchSettings()
        self.recorded: dict[str, Any] = {}

    def record(self, **fields: Any) -> None:
        self.recorded.update(fields)

    def url(self, path: str) -> str:
        return self.model.base_url.rstrip("/") + "/" + path.lstrip("/")

    async def send(
        self, method: str, url: str, *, ok: tuple[int, ...] = (200,), **kw: Any
    ) -> httpx.Response:
        kw = {k: v for k, v in kw.items() if v is not None and k != "signer"}
        async with httpx.AsyncClient() as client:
            response = await client.request(method, url, **kw)
        if response.status_code in ok:
            return response
        vendor_type, words = vendor_error_fields(response.json())
        error = error_from_status(response.status_code, words, vendor_type=vendor_type)
        raise BatchHTTPError(error.kind, response.status_code, words)


def _wire(api: str) -> WireAPI:
    wire = get_provider(api).wire
    assert wire is not None
    return wire


def _part(model: Model, fake: FakeVendor, tag: str, n: int = 1) -> BatchPart:
    sent = model.model_copy(update={"base_url": fake.url + "/v1"})
    p = plan(_wire(model.api), sent, _ask(), StreamOptions(api_key="k"))
    lines = [codec.BATCH.line(f"{tag}_{i}", p.request, p.model) for i in range(n)]
    return BatchPart(tag, p.model, lines, {}, p.request.url)


async def _all(results: AsyncIterator[RawResult]) -> list[RawResult]:
    return [r async for r in results]


def test_hostile_result_files_lose_no_row(caplog: pytest.LogCaptureFixture) -> None:
    model = _model(CHAT)
    with fake_vendor(scenarios={model.id: ["x"]}, batch_delay=0) as fake:
        session = _Session(model, fake)
        lines = [
            '{"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}}',
            '{"custom_id": "b", "response": {"status_code": "200", "body": {}}}',
            '{"custom_id": "c", "response": {"status_code": 200, "body": [1, 2]}}',
            '{"custom_id": "d", "response": {"status_code": 10e400, "body": null}}',
            '{"custom_id": "e", "response": {"status_code": 503, "body": "<html>down</html>"}}',
            '{"custom_id": "f", "error": "went wrong"}',
            '{"custom_id": "g", "error": {"code": 12345678901234567890, "message": []}}',
            '{"custom_id": "h", "response": null, "error": null}',
            '{"custom_id": "i", "resp',
            "[1, 2, 3]",
            '{"custom_id": {"nested": true}}',
            "\x00\xff junk",
            '{"custom_id": "j", "response": {"status_code": 200, "body": {"error": '
            '{"message": "slow down", "type": "rate_limit_exceeded"}}}}',
            '{"custom_id": "k", "error": {"code": "\u00b2\u00b3\u2074", "message": "odd"}}',
        ]
        stored = fake.batches.put_file(
            "\n".join(lines).encode("utf-8", "surrogateescape"), name="o"
        )
        status = dataclasses.replace(
            shapes.read_status({"id": "batch_x", "status": "completed"}),
            where={shapes.OUTPUT_FILE: stored.id},
        )
        seen: list[RawResult] = []

        async def run() -> None:
            async for r in codec.BATCH.results(session, status):
                seen.append(r)

        anyio.run(run)
    assert "result line 10, 11, 12 named no custom id" in caplog.text
    assert [r.custom_id for r in seen] == list("abcdefghijk")
    assert seen[0].outcome == "succeeded"  # the provider's reader says what is wrong
    assert {r.outcome for r in seen[1:]} == {"errored"}
    assert seen[4].kind == "overloaded" and seen[9].kind == "rate_limit"
    assert all(r.kind == "protocol" for r in (seen[1], seen[2], seen[3], seen[7], seen[8]))
    assert seen[10].kind == "server"  # a code no status reads (superscript digits): still a row


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@example(custom_id="q1", status=200, body=None, error={"code": "\u00b2\u00b3\u2074"})
@given(
    custom_id=_JSON | st.just("q1"),
    status=_JSON | st.sampled_from([200, 400, 429, 500]),
    body=_JSON,
    error=_JSON,
)
def test_any_json_in_any_field_is_read_without_raising(
    custom_id: Any, status: Any, body: Any, error: Any
) -> None:
    line = {
        "custom_id": custom_id,
        "response": {"status_code": status, "body": body},
        "error": error,
    }
    text = json.dumps(line)
    ((n, value, raw),) = list(jsonl(text.encode()))
    found = shapes.read_line(n, value, raw)
    if found is None:
        assert not (isinstance(custom_id, str) and custom_id)
    else:
        assert found.custom_id == custom_id
        assert found.outcome in ("succeeded", "errored", "expired", "cancelled")
        assert found.outcome != "succeeded" or isinstance(found.body, dict)


@settings(max_examples=200, deadline=None)
@given(fields=st.dictionaries(st.sampled_from(["id", "status", "request_counts", "metadata",
       "errors", "created_at", "expires_at", "output_file_id", "model"]), _JSON))  # fmt: skip
def test_any_batch_object_is_read_or_refused_as_protocol(fields: dict[str, Any]) -> None:
    try:
        status = shapes.read_status(fields)
    except BatchHTTPError as exc:
        assert exc.kind == "protocol"
        return
    assert status.counts.pending >= 0 and status.state in shapes.STATES.values()


# --- round trips: what the fake writes, the codec reads back ------------------------------


def _plan(api: str, **extra: Any) -> Any:
    model = _model(api, "gpt-5-mini" if extra.get("reasoning") else "gpt-4o-mini")
    return plan(_wire(api), model, _ask(), StreamOptions(api_key="k", **extra))


def _through_a_file(line: dict[str, Any]) -> RawResult:
    ((n, value, raw),) = list(jsonl(json.dumps(line).encode() + b"\n"))
    found = shapes.read_line(n, value, raw)
    assert found is not None
    return found


MESSAGES = {
    "text": AssistantMessage(
        content=[TextContent(text="four")], usage=USAGE, stop_reason="stop",
        api=CHAT, provider="openai", model="gpt-4o-mini",
    ),
    "tool": AssistantMessage(
        content=[TextContent(text="ok"), ToolCall(id="call_1", name="f", arguments={"a": [1]})],
        usage=USAGE, stop_reason="tool_use", api=CHAT, provider="openai", model="gpt-4o-mini",
    ),
    "length": AssistantMessage(
        content=[TextContent(text="cut")], usage=USAGE, stop_reason="length",
        api=CHAT, provider="openai", model="gpt-4o-mini",
    ),
}  # fmt: skip


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_every_answer_written_reads_back_as_itself(api: str, name: str) -> None:
    p = _plan(api)
    message = MESSAGES[name]
    body = codec.answer_body(message, p.model)
    raw = _through_a_file(shapes.result_line("q_1", body=body))
    assert raw.outcome == "succeeded" and raw.custom_id == "q_1"
    back = read_whole(p, raw.body)
    assert back.error is None, back.error
    assert back.stop_reason == message.stop_reason
    assert back.text() == message.text()
    assert [(c.id, c.name, c.arguments) for c in back.tool_calls()] == [
        (c.id, c.name, c.arguments) for c in message.tool_calls()
    ]
    assert (back.usage.input, back.usage.output, back.usage.cache_read) == (120, 30, 40)


_NEAREST: dict[str, str] = {
    "budget": "rate_limit",
    "refusal": "invalid_request",
    "network": "server",
    "aborted": "server",
    "protocol": "server",
    "invalid_output": "server",
}
"""Error kinds an OpenAI error body says as another (`tests/test_one_codec.py`'s table)."""


@pytest.mark.parametrize("kind", sorted(k for k in ERRORS if k != "expired"))
def test_every_error_written_reads_back_as_its_kind(kind: ErrorKind) -> None:
    status, body = error_body(kind, f"it failed: {kind}")
    raw = _through_a_file(shapes.result_line("q_1", body=body, status=status))
    assert raw.outcome == "errored" and raw.status == status
    assert raw.kind == _NEAREST.get(kind, kind)
    assert f"it failed: {kind}" in raw.message


def test_expired_and_cancelled_lines_read_back() -> None:
    expired = _through_a_file(
        shapes.result_line("a", code=shapes.EXPIRED_CODE, message=shapes.EXPIRED_TEXT)
    )
    cancelled = _through_a_file(
        shapes.result_line("b", code=shapes.CANCELLED_CODE, message=shapes.CANCELLED_TEXT)
    )
    other = _through_a_file(shapes.result_line("c", code="rate_limit_exceeded", message="slow"))
    assert (expired.outcome, expired.kind) == ("expired", "expired")
    assert (cancelled.outcome, cancelled.kind) == ("cancelled", "aborted")
    assert (other.outcome, other.kind) == ("errored", "rate_limit")


@pytest.mark.parametrize("word", sorted(shapes.STATES))
def test_every_batch_status_reads_back(word: str) -> None:
    written = shapes.batch_object(
        "batch_1", status=word, endpoint="/v1/responses", input_file_id="file-in",
        created_at=1_700_000_000, expires_at=1_700_086_400, counts=(10, 6, 1),
        output_file_id="file-out", error_file_id="file-err",
        errors=[{"code": shapes.QUEUE_FULL_CODE, "message": "full", "line": None}]
        if word == shapes.FAILED else (),
        metadata={shapes.TAG_KEY: "scabc", "other": "x"}, model="gpt-4o-mini",
    )  # fmt: skip
    status = shapes.read_status(json.loads(json.dumps(written)))
    assert status.state == shapes.STATES[word] and status.vendor_state == word
    assert (status.id, status.tag, status.model) == ("batch_1", "scabc", "gpt-4o-mini")
    assert (status.created_at, status.expires_at) == (1_700_000_000, 1_700_086_400)
    assert status.where[shapes.OUTPUT_FILE] == "file-out"
    assert status.where[shapes.ERROR_FILE] == "file-err"
    c = status.counts
    assert (c.total, c.succeeded, c.errored) == (10, 6, 1)
    assert c.expired == (3 if word == shapes.EXPIRED else 0)
    assert c.cancelled == (3 if word == shapes.CANCELLED else 0)
    assert shapes.queue_full(status) == (word == shapes.FAILED)


@pytest.mark.parametrize("api", APIS)
def test_a_line_is_the_planned_request_without_streaming(api: str) -> None:
    p = _plan(api, max_tokens=50, temperature=0.2)
    line = codec.BATCH.line("sc1p0_0", p.request, p.model)
    assert line == {
        "custom_id": "sc1p0_0",
        "method": "POST",
        "url": codec.ENDPOINTS[api],
        "body": _streamless(p.request.payload),
    }
    assert p.request.payload["stream"] is True and "stream" not in line["body"]
    mixed = BatchPart("t", p.model, [line, {**line, "url": "/v1/embeddings"}], {}, "")
    with pytest.raises(ValueError, match="one endpoint"):
        anyio.run(codec.BATCH.submit, None, mixed)  # type: ignore[arg-type]


def test_the_openai_sdk_runs_a_batch_on_the_fake_vendor() -> None:
    openai = pytest.importorskip("openai")
    model = _model(CHAT)
    with fake_vendor(scenarios={model.id: ["one", "two", "3", "4"]}, batch_delay=0.05) as fake:
        part = _part(model, fake, "sdk", n=2)
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="sk-test", max_retries=0)
        data = "".join(json.dumps(line) + "\n" for line in part.lines).encode()
        uploaded = client.files.create(file=("in.jsonl", data), purpose="batch")
        ask = {"input_file_id": uploaded.id, "endpoint": "/v1/chat/completions"}
        batch = client.batches.create(**ask, completion_window="24h", metadata={"job": "sdk"})
        assert batch.status == shapes.VALIDATING
        while (batch := client.batches.retrieve(batch.id)).status != shapes.COMPLETED:
            time.sleep(0.05)
        assert batch.request_counts is not None and batch.request_counts.completed == 2
        assert batch.output_file_id is not None and batch.error_file_id is None
        lines = client.files.content(batch.output_file_id).text.splitlines()
        later = client.batches.create(**ask, completion_window="24h")
        listed = [b.id for b in client.batches.list(limit=1)]  # two pages, newest first
        with pytest.raises(openai.BadRequestError):
            client.batches.cancel(batch.id)  # it has ended
        assert client.files.delete(uploaded.id).deleted
    answers = [json.loads(line)["response"]["body"] for line in lines]
    assert [a["choices"][0]["message"]["content"] for a in answers] == ["one", "two"]
    assert listed == [later.id, batch.id]


def test_lines_as_openai_documents_them_read_back() -> None:
    chat = {
        "id": "batch_req_1", "custom_id": "request-1", "error": None,
        "response": {"status_code": 200, "request_id": "f00", "body": {
            "id": "chatcmpl-9", "object": "chat.completion", "created": 1724858089,
            "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Four.", "refusal": None}}],
            "usage": {"prompt_tokens": 24, "completion_tokens": 8, "total_tokens": 32},
        }},
    }  # fmt: skip
    responses = {
        "id": "batch_req_2", "custom_id": "request-2", "error": None,
        "response": {"status_code": 200, "request_id": "f01", "body": {
            "id": "resp_9", "object": "response", "created_at": 1724858089,
            "status": "completed", "model": "gpt-4o-mini", "error": None,
            "output": [{"type": "message", "id": "msg_9", "status": "completed",
                        "role": "assistant", "content": [
                            {"type": "output_text", "text": "Four.", "annotations": []}]}],
            "usage": {"input_tokens": 24, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 32},
        }},
    }  # fmt: skip
    too_long = {
        "id": "batch_req_3", "custom_id": "request-3", "error": None,
        "response": {"status_code": 400, "request_id": "f02", "body": {"error": {
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}}},
    }  # fmt: skip
    expired = {
        "id": "batch_req_4",
        "custom_id": "request-4",
        "response": None,
        "error": {"code": "batch_expired", "message": "not executed in the completion window"},
    }
    for line, api in ((chat, CHAT), (responses, RESPONSES)):
        raw = _through_a_file(line)
        message = read_whole(_plan(api), raw.body)
        assert (raw.outcome, message.text(), message.stop_reason) == ("succeeded", "Four.", "stop")
        assert (message.usage.input, message.usage.output) == (24, 8)
        assert message.usage.cost is not None and message.usage.cost.total > 0
    failed = _through_a_file(too_long)
    assert (failed.outcome, failed.kind, failed.status) == ("errored", "context_overflow", 400)
    assert _through_a_file(expired).outcome == "expired"
