"""Mistral batch inference from the user's side: the codec's tables written by the fake
vendor and read back, and `stream_core.batch` against `fake_vendor` (fidelity against
`stream()` of the same script, errors, timeouts, cancel, listing, recovery after a lost
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
from stream_core.provider import BatchCounts, BatchHTTPError, BatchStatus, RawResult
from stream_core.providers import _mistral_batch as codec
from stream_core.providers._chat_encode import error_body
from stream_core.testing import (
    FakeVendor,
    fake_vendor,
    faux_error,
    faux_message,
    faux_text,
    faux_tool_call,
)
from stream_core.testing import _batch_routes_mistral as routes

KEY = "mistral-batch-test-key"
MODEL = get_model("mistral", "mistral-small-latest")
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
        content=[ThinkingContent(thinking="Let me see."), TextContent(text="Thought it through.")],
    )  # fmt: skip
    return faux_message(message)


TURNS = [
    faux_text("Hello there.", usage=USAGE),
    faux_tool_call("weather", {"city": "Paris"}, id="abcDEF123", usage=USAGE),
    faux_text('{"city": "Paris"}', usage=USAGE),
    _thinking(),
]


def _requests(server: FakeVendor) -> list[BatchRequest]:
    return [
        BatchRequest("plain", MODEL, _ask("Say hello."), _options(server)),
        BatchRequest(
            "tool", MODEL, _ask("Weather?", [WEATHER]), _options(server, tool_choice="required")
        ),
        BatchRequest(
            "structured", MODEL, _ask("Which city?"), _options(server, output_schema=SCHEMA)
        ),
        BatchRequest("thinking", MODEL, _ask("Think."), _options(server, reasoning="low")),
    ]


# --- 1. the tables, written by the fake and read back ---------------------------------------


@pytest.mark.parametrize("word", list(codec.STATES))
def test_a_job_object_reads_back(word: str) -> None:
    said = codec.job_object(
        "job-1", word, model=MODEL.id, input_files=["file-1"],
        metadata={codec.TAG_KEY: "scabc"}, created_at=1_700_000_000, timeout_hours=24,
        total=9, succeeded=3, failed=2, output_file="file-2",
    )  # fmt: skip
    back = codec.read_status(json.loads(json.dumps(said)))
    state = "ended" if word == "FAILED" else codec.STATES[word]  # FAILED with an output file
    assert (back.id, back.state, back.vendor_state, back.tag) == ("job-1", state, word, "scabc")
    # An ended job's 4 requests with no line: what its status says became of them.
    unrun = {"TIMEOUT_EXCEEDED": "expired", "CANCELLED": "cancelled"}.get(word, "errored")
    rest = 4 if state == "ended" else 0
    want = {"expired": 0, "cancelled": 0, "errored": 2}
    want[unrun] += rest
    assert back.counts == BatchCounts(total=9, succeeded=3, **want)
    assert back.created_at == 1_700_000_000 and back.expires_at == 1_700_000_000 + 24 * 3600
    assert back.where["output_file"] == "file-2" and back.where["input_files"] == ["file-1"]
    assert back.model == MODEL.id


def test_a_failed_job_without_files_is_failed() -> None:
    said = codec.job_object(
        "job-1", "FAILED", model="m", input_files=[], metadata={}, created_at=0,
        timeout_hours=24, total=2,
    )  # fmt: skip
    said["errors"] = [{"message": "line 1: bad body", "count": 1}]
    back = codec.read_status(said)
    assert back.state == "failed" and back.error == "line 1: bad body"


KINDS: tuple[ErrorKind, ...] = typing.get_args(ErrorKind)


@pytest.mark.parametrize("kind", KINDS)
def test_every_errored_line_reads_back_with_a_kind(kind: ErrorKind) -> None:
    status, body = error_body(kind, "it went wrong")
    line = codec.result_line("l1", "q_1", status=status, error=body)
    back = codec.read_result(1, json.loads(json.dumps(line)), json.dumps(line))
    assert back is not None and (back.custom_id, back.outcome) == ("q_1", "errored")
    assert back.status == status and "it went wrong" in back.message
    sayable = {"invalid_request", "auth", "not_found", "context_overflow", "rate_limit",
               "server", "overloaded", "timeout", "content_filter"}  # fmt: skip
    assert back.kind == kind if kind in sayable else back.kind in KINDS


def test_a_succeeded_line_reads_back() -> None:
    line = codec.result_line("l1", "q_1", body={"id": "x", "choices": []})
    back = codec.read_result(1, line, json.dumps(line))
    assert back == RawResult("q_1", "succeeded", body={"id": "x", "choices": []})


# --- 2. the fake vendor end to end through the engine ----------------------------------------


def test_batch_results_are_the_streamed_messages_at_half_the_price(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: TURNS + TURNS}, batch_delay=0.05) as server:
        requests = _requests(server)

        async def run() -> tuple[list[AssistantMessage], list[Any], Any]:
            streamed = [await complete(r.model, r.context, r.options) for r in requests]
            job = await submit(requests, store=tmp_path, name="fidelity")
            (batch,) = list(server.batches.batches.values())  # kept: cleanup deletes it
            return streamed, await job.collect(interval=0.02, timeout=20), batch

        streamed, results, batch = anyio.run(run)
        sent = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
        left = dict(server.batches.files)

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
    # Each line is the streaming request minus `stream`; the job runs the model.
    bodies = [payload for _, _, _, payload in batch.requests]
    assert bodies == [{k: v for k, v in body.items() if k != "stream"} for body in sent]
    assert all(body["stream"] is True for body in sent)
    assert batch.meta["model"] == MODEL.id
    assert batch.meta["metadata"][codec.TAG_KEY].startswith("sc")
    assert left == {}  # collected: input, output and error files deleted


def test_errored_and_timed_out_requests_are_messages_with_their_kind(tmp_path: Path) -> None:
    script = [faux_text("first", usage=USAGE), faux_error("invalid_request"), faux_text("later")]
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
    assert errored.error is not None and errored.error.kind == "invalid_request"
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


def test_listing_pages_through_every_job_newest_first() -> None:
    with fake_vendor(scenarios={MODEL.id: ["x"]}, batch_delay=3600) as server:
        backend = server.batches
        meta = {"model": MODEL.id, "metadata": {}, "input_files": [], "timeout_hours": 24}
        for i in range(230):
            backend.create("mistral", [(f"l_{i}", routes.API, MODEL.id, {})], prefix="j-",
                           meta=meta)  # fmt: skip
        model = MODEL.replace(base_url=server.url)
        options = StreamOptions(api_key=KEY)
        found = anyio.run(lambda: vendor_batches(model, options=options, limit=1000))
        want = [b.id for b in backend.listing("mistral")]
    assert [s.id for s in found] == want and len(want) == 230
    assert all(s.state == "running" and s.counts.total == 1 for s in found)


def test_a_create_whose_answer_was_lost_is_found_by_its_tag(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["one", "two", "three"]}, batch_delay=0.05) as server:
        requests = [BatchRequest(f"f{i}", MODEL, _ask("q"), _options(server)) for i in range(3)]
        hold = server.batches.holds.add("POST", r"/v1/batch/jobs", when="after")

        async def crash() -> None:
            # The vendor created the job; its answer never reaches the client.
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
        assert server.batches.files == {}  # the uploaded file, recorded before, is deleted
    assert [r.message.text() for r in results] == ["one", "two", "three"]


class _Files:
    """A session whose file downloads answer `files[id]`."""

    model = MODEL
    settings = BatchSettings()
    recorded: dict[str, Any] = {}

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def send(self, method: str, url: str, **_: Any) -> httpx.Response:
        file_id = url.rsplit("/", 2)[-2]
        return httpx.Response(200, content=self.files[file_id])

    def record(self, **fields: Any) -> None:
        pass

    def url(self, path: str) -> str:
        return "https://api.mistral.test" + path


HOSTILE = [
    b"not json at all",
    b'{"id": "1", "custom_id": "cut_1", "response": {"status_c',
    b"[1, 2, 3]",
    b'{"custom_id": 12, "response": {"status_code": 200, "body": {}}}',
    b'{"custom_id": "nothing"}',
    b'{"custom_id": "list_response", "response": [], "error": null}',
    b'{"custom_id": "bad_body", "response": {"status_code": 200, "body": "hi"}}',
    b'{"custom_id": "odd_status", "response": {"status_code": "teapot", "body": {}}}',
    b'{"custom_id": "huge_status", "response": {"status_code": 1e400, "body": {}}, "error": 7}',
    b'{"custom_id": "err_only", "error": {"message": "rate limited", "code": 429}}',
    b'{"custom_id": "huge", "response": {"status_code": 200, "body": {"choices": [], '
    b'"usage": {"prompt_tokens": 1e400, "completion_tokens": 99999999999999999999999}}}}',
    b"[" * 100_000 + b"]" * 100_000,
]


def test_hostile_result_lines_never_raise_and_lose_no_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = ["cut_1", "nothing", "list_response", "bad_body", "odd_status", "huge_status",
           "err_only", "huge", "unseen_1", "unseen_2"]  # fmt: skip
    inputs = "".join(json.dumps({"custom_id": i, "body": {}}) + "\n" for i in ids).encode()
    session = _Files({"out": b"\n".join(HOSTILE), "in": inputs})
    status = BatchStatus(
        id="job-h", state="ended", vendor_state="SUCCESS",
        counts=BatchCounts(total=len(ids)),
        where={"output_file": "out", "error_file": None, "input_files": ["in"]},
    )  # fmt: skip

    async def read() -> list[RawResult]:
        return [r async for r in codec.results(session, status)]

    with caplog.at_level(logging.WARNING, logger="stream_core"):
        found = anyio.run(read)
    by_id = {r.custom_id: r for r in found}
    assert sorted(by_id) == sorted(ids) and len(found) == len(ids)
    for name in ("cut_1", "nothing", "list_response", "bad_body", "odd_status", "unseen_1"):
        assert (by_id[name].outcome, by_id[name].kind) == ("errored", "protocol"), name
    assert by_id["huge_status"].outcome == "errored"
    assert (by_id["err_only"].outcome, by_id["err_only"].kind) == ("errored", "rate_limit")
    assert by_id["huge"].outcome == "succeeded"
    assert "named no custom id" in by_id["unseen_2"].message
    assert "result line 1, 3, 4, 12 named no custom id" in caplog.text


@pytest.mark.parametrize(
    "data",
    [
        {"id": "j", "status": 5, "total_requests": 10**40, "created_at": "garbage",
         "metadata": [1], "input_files": "x", "errors": "boom"},
        {"id": "j", "succeeded_requests": True, "failed_requests": -3, "created_at": 1e400,
         "timeout_hours": 10**9},
    ],
)  # fmt: skip
def test_a_hostile_job_object_reads_as_a_running_job(data: dict[str, Any]) -> None:
    back = codec.read_status(data)
    assert back.state == "running" and back.counts == BatchCounts()
    assert back.created_at is None and back.expires_at is None and back.tag is None
    assert back.where["input_files"] == []


@pytest.mark.parametrize("data", [None, [], {"id": 5}, {"id": ""}, {"status": "SUCCESS"}])
def test_a_job_object_without_an_id_is_a_protocol_error(data: Any) -> None:
    with pytest.raises(BatchHTTPError) as caught:
        codec.read_status(data)
    assert caught.value.kind == "protocol"
