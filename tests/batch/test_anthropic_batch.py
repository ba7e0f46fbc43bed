"""Anthropic Message Batches from the user's side: the codec's tables written by the fake
vendor and read back, and `stream_core.batch` against `fake_vendor` (fidelity against
`stream()` of the same script, errors, expiry, cancel, listing, recovery after a lost
create answer, hostile result lines)."""

from __future__ import annotations

import json
import logging
import typing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from stream_core import (
    AssistantMessage,
    Context,
    ErrorKind,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    Usage,
    UserMessage,
    complete,
    get_model,
)
from stream_core.batch import BatchRequest, BatchSettings, submit, vendor_batches
from stream_core.provider import BatchCounts, BatchHTTPError, BatchPart, BatchStatus, RawResult
from stream_core.providers import _anthropic_batch as codec
from stream_core.providers._anthropic_encode import error_body
from stream_core.providers.anthropic import ERROR_TYPES
from stream_core.testing import (
    FakeVendor,
    fake_vendor,
    faux_error,
    faux_message,
    faux_text,
    faux_tool_call,
)
from stream_core.testing import _batch_routes_anthropic as routes

KEY = "sk-ant-batch-test-key"
MODEL = get_model("anthropic", "claude-haiku-4-5")
USAGE = Usage(input=120, output=30, cache_read=10)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = Tool(
    name="weather",
    description="The weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _options(server: FakeVendor, **more: Any) -> StreamOptions:
    return StreamOptions(api_key=KEY, base_url=server.url, max_tokens=400, **more)


def _ask(text: str, tools: list[Tool] | None = None) -> Context:
    return Context(messages=[UserMessage(content=text)], tools=tools or [])


def _thinking() -> Any:
    message = AssistantMessage(
        api="faux", provider="faux", model="faux", usage=USAGE,
        content=[ThinkingContent(thinking="Let me see.", signature="sig-1"),
                 TextContent(text="Thought it through.")],
    )  # fmt: skip
    return faux_message(message)


TURNS = [
    faux_text("Hello there.", usage=USAGE),
    faux_tool_call("weather", {"city": "Paris"}, text="Checking.", usage=USAGE),
    faux_text('{"city": "Paris"}', usage=USAGE),
    _thinking(),
]


def _requests(server: FakeVendor) -> list[BatchRequest]:
    return [
        BatchRequest("plain", MODEL, _ask("Say hello."), _options(server)),
        BatchRequest("tool", MODEL, _ask("Weather?", [WEATHER]), _options(server)),
        BatchRequest(
            "structured", MODEL, _ask("Which city?"), _options(server, output_schema=SCHEMA)
        ),
        BatchRequest("thinking", MODEL, _ask("Think."), _options(server, reasoning="low")),
    ]


def _settings() -> BatchSettings:
    return BatchSettings()


async def _streamed(requests: list[BatchRequest]) -> list[AssistantMessage]:
    return [await complete(r.model, r.context, r.options) for r in requests]


# --- 1. the tables, written by the fake and read back ---------------------------------------


@pytest.mark.parametrize("state", ["running", "cancelling", "ended"])
def test_a_batch_object_reads_back(state: Any) -> None:
    counts = BatchCounts(total=9, succeeded=3, errored=2, expired=1, cancelled=1)
    said = codec.batch_object(
        "msgbatch_1", state, counts, created_at=1_700_000_000.25, expires_at=1_700_086_400.0,
        ended_at=1_700_000_100.0, results_url="https://x.test/results",
    )  # fmt: skip
    back = codec.read_status(json.loads(json.dumps(said)))
    assert (back.id, back.state, back.counts) == ("msgbatch_1", state, counts)
    assert back.created_at == pytest.approx(1_700_000_000.25)
    assert back.expires_at == pytest.approx(1_700_086_400.0)
    assert back.where == {"results_url": "https://x.test/results"}


KINDS: tuple[ErrorKind, ...] = typing.get_args(ErrorKind)


@pytest.mark.parametrize("kind", KINDS)
def test_every_errored_line_reads_back_with_a_kind(kind: ErrorKind) -> None:
    status, body = error_body(kind, "it went wrong")
    line = codec.result_line("q_1", "errored", error=body)
    back = codec.read_result(1, json.loads(json.dumps(line)), json.dumps(line))
    assert back is not None and (back.custom_id, back.outcome) == ("q_1", "errored")
    assert back.status == status
    sayable = set(ERROR_TYPES.values()) | {"context_overflow"}
    assert back.kind == kind if kind in sayable else back.kind in KINDS
    assert "it went wrong" in back.message


@pytest.mark.parametrize("outcome", ["expired", "cancelled"])
def test_unrun_lines_read_back(outcome: Any) -> None:
    line = codec.result_line("q_2", outcome)
    back = codec.read_result(1, line, json.dumps(line))
    assert back is not None and back.outcome == outcome
    assert back.kind == ("expired" if outcome == "expired" else "aborted")


def test_streaming_betas_stay_out_of_the_create_call() -> None:
    merged = {
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "fine-grained-tool-streaming-2025-05-14, interleaved-thinking-2025-05-14,"
        "interleaved-thinking-2025-05-14",
    }
    assert codec.create_headers(merged) == {
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "interleaved-thinking-2025-05-14",
    }
    assert "anthropic-beta" not in codec.create_headers(
        {"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"}
    )


# --- 2. the fake vendor end to end through the engine ----------------------------------------


def test_batch_results_are_the_streamed_messages_at_half_the_price(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: TURNS + TURNS}, batch_delay=0.05) as server:
        requests = _requests(server)

        async def run() -> tuple[list[AssistantMessage], list[Any], Any]:
            streamed = await _streamed(requests)
            job = await submit(requests, store=tmp_path, name="fidelity")
            (batch,) = list(server.batches.batches.values())  # kept: cleanup deletes it
            return streamed, await job.collect(interval=0.02, timeout=20), batch

        streamed, results, batch = anyio.run(run)
        sent = [r.body for r in server.requests if r.path == "/v1/messages"]

    assert [r.custom_id for r in results] == [r.custom_id for r in requests]
    for want, got in zip(streamed, results, strict=True):
        m = got.message
        assert got.outcome == "succeeded" and m.error is None
        assert m.content == want.content
        assert m.stop_reason == want.stop_reason
        assert m.output == want.output
        assert m.usage.model_dump(exclude={"cost"}) == want.usage.model_dump(exclude={"cost"})
        assert m.usage.cost is not None and want.usage.cost is not None
        assert m.usage.cost.total == pytest.approx(want.usage.cost.total / 2)
    assert results[1].message.content[-1].type == "tool_call"
    assert results[2].message.output == {"city": "Paris"}
    assert results[3].message.content[0].type == "thinking"
    # Each line is the streaming request minus `stream`.
    params = [payload for _, _, _, payload in batch.requests]
    assert params == [{k: v for k, v in body.items() if k != "stream"} for body in sent]
    assert all(body["stream"] is True for body in sent)
    betas = batch.meta["headers"].get("anthropic-beta", "")
    assert "interleaved-thinking-2025-05-14" in betas
    assert "streaming" not in betas
    assert not server.batches.batches  # collected: the batch was deleted


def test_errored_and_expired_requests_are_messages_with_their_kind(tmp_path: Path) -> None:
    script = [faux_text("first", usage=USAGE), faux_error("overloaded"), faux_text("later")]
    with fake_vendor(scenarios={MODEL.id: script}, batch_delay=0.2, batch_expiry=0.05) as server:
        server.batches.expire_after = 2
        requests = [BatchRequest(f"r{i}", MODEL, _ask(f"q{i}"), _options(server)) for i in range(3)]

        async def run() -> tuple[list[Any], int, list[Any]]:
            job = await submit(requests, store=tmp_path, name="fates")
            first = await job.collect(interval=0.02, timeout=20)
            server.batches.expiry = None
            again = await job.resubmit_expired()
            return first, again, await job.collect(interval=0.02, timeout=20)

        first, again, second = anyio.run(run)

    assert [r.outcome for r in first] == ["succeeded", "errored", "expired"]
    assert first[0].message.text() == "first"
    errored, expired = first[1].message, first[2].message
    assert errored.error is not None and errored.error.kind == "overloaded"
    assert expired.error is not None and expired.error.kind == "expired"
    assert errored.stop_reason == expired.stop_reason == "error"
    assert again == 1
    assert [r.outcome for r in second] == ["succeeded", "errored", "succeeded"]
    assert second[2].message.text() == "later"


def test_a_cancelled_job_gives_aborted_messages(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["never"] * 2}, batch_delay=3600) as server:
        requests = [BatchRequest(f"c{i}", MODEL, _ask("q"), _options(server)) for i in range(2)]

        async def run() -> list[Any]:
            job = await submit(requests, store=tmp_path, name="cancel")
            await job.cancel()
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    error = results[0].message.error
    assert error is not None and error.kind == "aborted"


def test_listing_pages_through_every_batch_newest_first() -> None:
    with fake_vendor(scenarios={MODEL.id: ["x"]}, batch_delay=3600) as server:
        backend = server.batches
        for i in range(130):
            backend.create("anthropic", [(f"l_{i}", routes.API, MODEL.id, {})], prefix="msgbatch_")
        model = MODEL.replace(base_url=server.url)
        options = StreamOptions(api_key=KEY)
        found = anyio.run(lambda: vendor_batches(model, options=options, limit=1000))
        want = [b.id for b in backend.listing("anthropic")]
    assert [s.id for s in found] == want and len(want) == 130
    assert all(s.state == "running" and s.counts.total == 1 for s in found)


def test_a_create_whose_answer_was_lost_is_found_not_made_twice(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["one", "two", "three"]}, batch_delay=0.05) as server:
        requests = [BatchRequest(f"f{i}", MODEL, _ask("q"), _options(server)) for i in range(3)]
        hold = server.batches.holds.add("POST", r"/v1/messages/batches", when="after")

        async def crash() -> None:
            # The vendor created the batch; its answer never reaches the client.
            async with anyio.create_task_group() as tg:

                async def lose() -> None:
                    await anyio.to_thread.run_sync(hold.wait)
                    tg.cancel_scope.cancel()

                tg.start_soon(lose)
                await submit(requests, store=tmp_path, name="lost")

        anyio.run(crash)
        hold.release()

        async def again() -> list[Any]:
            job = await submit(requests, store=tmp_path, name="lost")
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(again)
        assert server.batches.created == 1
    assert [r.message.text() for r in results] == ["one", "two", "three"]


class _Lines:
    """A session whose every GET answers `body` (a results file)."""

    model = MODEL
    settings = BatchSettings()
    recorded: dict[str, Any] = {}

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def send(self, method: str, url: str, **_: Any) -> httpx.Response:
        return httpx.Response(200, content=self.body)

    def record(self, **fields: Any) -> None:
        pass

    def url(self, path: str) -> str:
        return "https://api.anthropic.test" + path


HOSTILE = [
    b"not json at all",
    b'{"custom_id": "cut_1", "result": {"type": "succ',
    b"[1, 2, 3]",
    b'"a string"',
    b'{"custom_id": 12, "result": {"type": "succeeded", "message": {}}}',
    b'{"custom_id": "no_result"}',
    b'{"custom_id": "list_result", "result": []}',
    b'{"custom_id": "bad_message", "result": {"type": "succeeded", "message": "hi"}}',
    b'{"custom_id": "bad_error", "result": {"type": "errored", "error": 12}}',
    b'{"custom_id": "odd_type", "result": {"type": "exploded"}}',
    b'{"custom_id": "huge", "result": {"type": "succeeded", "message": {"content": [], '
    b'"usage": {"input_tokens": 1e400, "output_tokens": 99999999999999999999999999}}}}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"custom_id": "fine", "result": {"type": "expired"}}',
]


def test_hostile_result_lines_never_raise_and_keep_every_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = _Lines(b"\n".join(HOSTILE) + b"\n\n")
    status = BatchStatus(id="msgbatch_h", state="ended", vendor_state="ended")

    async def read() -> list[RawResult]:
        return [r async for r in codec.results(session, status)]

    with caplog.at_level(logging.WARNING, logger="stream_core"):
        found = anyio.run(read)
    by_id = {r.custom_id: r for r in found}
    assert set(by_id) == {
        "cut_1", "no_result", "list_result", "bad_message", "bad_error", "odd_type", "huge",
        "fine",
    }  # fmt: skip
    for name in ("cut_1", "no_result", "list_result", "bad_message", "odd_type"):
        assert (by_id[name].outcome, by_id[name].kind) == ("errored", "protocol"), name
    assert by_id["bad_error"].outcome == "errored"
    assert by_id["huge"].outcome == "succeeded"
    assert by_id["fine"].outcome == "expired"
    assert "result line 1, 3, 4, 5, 12 named no custom id" in caplog.text


@pytest.mark.parametrize(
    "data",
    [
        {"id": "b", "processing_status": 5, "request_counts": {"processing": 10**40},
         "created_at": "garbage", "expires_at": 1e400},
        {"id": "b", "request_counts": [1], "created_at": "9999-99-99T00:00:00Z"},
        {"id": "b", "request_counts": {"succeeded": True, "errored": -3, "expired": 2.5}},
    ],
)  # fmt: skip
def test_a_hostile_batch_object_reads_as_a_running_batch(data: dict[str, Any]) -> None:
    back = codec.read_status(data)
    assert back.state == "running" and back.counts == BatchCounts()
    assert back.created_at is None and back.expires_at is None


@pytest.mark.parametrize("data", [None, [], {"id": 5}, {"id": ""}, {"processing_status": "ended"}])
def test_a_batch_object_without_an_id_is_a_protocol_error(data: Any) -> None:
    with pytest.raises(BatchHTTPError) as caught:
        codec.read_status(data)
    assert caught.value.kind == "protocol"


def test_find_keeps_only_batches_that_may_be_the_part_s() -> None:
    # Ended batches are told by their results' custom ids; running ones cannot be.
    with fake_vendor(scenarios={MODEL.id: ["a"] * 10}, batch_delay=0.0) as server:
        backend = server.batches
        mine = backend.create("anthropic", [("p_0", routes.API, MODEL.id, {})], prefix="b_")
        other = backend.create("anthropic", [("o_0", routes.API, MODEL.id, {})], prefix="b_")
        two = backend.create(
            "anthropic", [(f"t_{i}", routes.API, MODEL.id, {}) for i in range(2)], prefix="b_"
        )
        backend.delay = 3600
        running = backend.create("anthropic", [("r_0", routes.API, MODEL.id, {})], prefix="b_")
        model = MODEL.replace(base_url=server.url)
        part = BatchPart("p", model, [{"custom_id": "p_0", "params": {}}])

        async def find(since: float) -> list[str]:
            from stream_core.batch._session import HttpSession
            from stream_core.provider import get_provider

            wire = get_provider(model.api).wire
            assert wire is not None
            session = HttpSession(wire, model, StreamOptions(api_key=KEY), _settings(), None, 0)
            try:
                return await codec.find(session, part, since)
            finally:
                await session.aclose()

        found = anyio.run(find, mine.created_at - 1)
        later = anyio.run(find, backend.clock() + 60)
    assert found == [mine.id, running.id]
    assert other.id not in found and two.id not in found
    assert later == []
