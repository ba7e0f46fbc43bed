"""Vertex AI batch prediction from the user's side: the codec's tables written by the fake
vendor and read back, and `stream_core.batch` against `fake_vendor` and its Cloud Storage
(fidelity against `stream()` of the same script, errors, expiry, cancel, listing, find,
the bucket it needs; result lines without their key matched by the request they echo;
hostile result lines and jobs)."""

from __future__ import annotations

import json
import random
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
from stream_core.batch._session import HttpSession
from stream_core.provider import BatchHTTPError, BatchPart, BatchStatus, RawResult, get_provider
from stream_core.provider import plan as plan_call
from stream_core.providers import _gcs, google
from stream_core.providers import _vertex_batch as codec
from stream_core.providers._gemini_whole import read_error
from stream_core.providers._google_batch import ENDED_AS, STATES, pack_keys
from stream_core.testing import (
    FakeVendor,
    fake_vendor,
    faux_error,
    faux_message,
    faux_text,
    faux_tool_call,
)

KEY = "vertex-express-test-key"
MODEL = get_model("google-vertex", "gemini-2.5-flash")
WIRE = get_provider(MODEL.api).wire
BUCKET = "eval-bucket"
WHERE = "/v1/projects/proj-1/locations/us-central1"
USAGE = Usage(input=120, output=30, cache_read=10)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = Tool(
    name="weather",
    description="The weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
THINKING = AssistantMessage(
    api="faux", provider="faux", model="faux", usage=Usage(input=50, output=40, reasoning=25),
    content=[ThinkingContent(thinking="Let me see.", signature="c2lnLTE="),
             TextContent(text="Thought it through.", text_signature="c2lnLTI=")],
)  # fmt: skip
TURNS = [
    faux_text("Hello there.", usage=USAGE),
    faux_tool_call("weather", {"city": "Paris"}, text="Checking.", usage=USAGE),
    faux_text('{"city": "Paris"}', usage=USAGE),
    faux_message(THINKING),
]


def _base(server: FakeVendor) -> str:
    return server.url + WHERE + "/publishers/google"


def _options(server: FakeVendor, **more: Any) -> StreamOptions:
    return StreamOptions(api_key=KEY, base_url=_base(server), max_tokens=400, **more)


def _settings(server: FakeVendor, **more: Any) -> BatchSettings:
    return BatchSettings(storage_url=server.url, bucket=BUCKET, **more)


def _ask(text: str, tools: list[Tool] | None = None) -> Context:
    return Context(messages=[UserMessage(content=text)], tools=tools or [])


def _requests(server: FakeVendor) -> list[BatchRequest]:
    return [
        BatchRequest("plain", MODEL, _ask("Say hello."), _options(server)),
        BatchRequest("tool", MODEL, _ask("Weather?", [WEATHER]), _options(server)),
        BatchRequest(
            "structured", MODEL, _ask("Which city?"), _options(server, output_schema=SCHEMA)
        ),
        BatchRequest("thinking", MODEL, _ask("Think."), _options(server, reasoning="low")),
    ]


def _session(server: FakeVendor, recorded: dict[str, Any] | None = None) -> HttpSession:
    assert WIRE is not None
    model = MODEL.replace(base_url=_base(server))
    return HttpSession(
        WIRE, model, StreamOptions(api_key=KEY), _settings(server), None, 0, recorded=recorded
    )


def _objects(server: FakeVendor) -> dict[str, bytes]:
    with server.batches.lock:
        return {f.id: f.data for f in server.batches.files.values()}


# --- 1. the tables, written by the fake and read back ---------------------------------------


KINDS: tuple[ErrorKind, ...] = typing.get_args(ErrorKind)


@pytest.mark.parametrize("kind", KINDS)
def test_every_error_status_reads_back_with_its_kind(kind: ErrorKind) -> None:
    sayable = set(google.ERROR_STATUSES.values()) | {"context_overflow"}
    text = "prompt is too long" if kind == "context_overflow" else "it went wrong"
    said = codec.status_text(kind, text, 429 if kind == "rate_limit" else 400)
    back, message, status = read_error(said)
    assert back == kind if kind in sayable else back in KINDS
    assert text in message
    assert status == (429 if kind == "rate_limit" else 400)


@pytest.mark.parametrize("word", [w for w in STATES if w.startswith("JOB_STATE_")])
def test_every_job_state_reads_back(word: str) -> None:
    said = codec.job_resource(
        "projects/p/locations/l/batchPredictionJobs/77", tag="t", model="gemini-x",
        state="running", ended_as=None, stats=(4, 3, 2), created=1_700_000_000.5,
        source="gs://bkt/in.jsonl", output="gs://bkt/out", folder="gs://bkt/out/prediction-1",
    )  # fmt: skip
    said["state"] = word
    back = codec._status(json.loads(json.dumps(said)))
    assert back is not None and (back.id, back.state, back.vendor_state) == (
        "77",
        STATES[word],
        word,
    )
    assert (back.counts.total, back.counts.succeeded, back.counts.errored) == (9, 4, 3)
    assert back.counts.expired == (2 if ENDED_AS.get(word) == "expired" else 0)
    assert back.counts.cancelled == (2 if ENDED_AS.get(word) == "cancelled" else 0)
    assert (back.tag, back.model) == ("t", "gemini-x")
    assert back.where == {
        "output": "gs://bkt/out/prediction-1", "input": "gs://bkt/in.jsonl",
        "output_prefix": "gs://bkt/out",
    }  # fmt: skip


def test_the_endpoint_is_the_model_s_less_its_publisher() -> None:
    model = MODEL.replace(compat={"project": "proj-9", "location": "europe-west4"})
    session: Any = type("S", (), {"model": model, "options": StreamOptions(api_key="k")})()
    assert codec._endpoint(session) == (
        "https://europe-west4-aiplatform.googleapis.com/v1",
        "projects/proj-9/locations/europe-west4",
    )
    express = MODEL.replace(base_url="https://aiplatform.googleapis.com/v1/publishers/google")
    session.model = express
    with pytest.raises(ValueError, match="project and location"):
        codec._endpoint(session)


# --- 2. the fake vendor end to end through the engine ----------------------------------------


def test_results_are_the_streamed_messages_at_half_the_price(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: TURNS + TURNS}, batch_delay=0.05) as server:
        requests = _requests(server)

        async def run() -> tuple[list[AssistantMessage], list[Any]]:
            streamed = [await complete(r.model, r.context, r.options) for r in requests]
            job = await submit(
                requests, store=tmp_path, name="fidelity", settings=_settings(server)
            )
            return streamed, await job.collect(interval=0.02, timeout=20)

        streamed, results = anyio.run(run)
        (batch,) = server.batches.listing("vertex")
        sent = [r.body for r in server.requests if r.path.endswith(":streamGenerateContent")]
        left = _objects(server)

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
    assert results[1].message.stop_reason == "tool_use"
    assert results[2].message.output == {"city": "Paris"}
    assert results[3].message.content[0].type == "thinking"
    # Each line is the streaming request as it was sent, its key beside it.
    assert [payload for _, _, _, payload in batch.requests] == sent
    assert batch.meta["source"].startswith(f"gs://{BUCKET}/stream-core-batches/sc")
    assert batch.meta["model"] == MODEL.id
    assert left == {}  # the input and the predictions, deleted once collected


def test_errored_and_expired_requests_are_messages_with_their_kind(tmp_path: Path) -> None:
    script = [faux_text("first", usage=USAGE), faux_error("overloaded"), faux_text("later")]
    with fake_vendor(scenarios={MODEL.id: script}, batch_delay=0.2, batch_expiry=0.05) as server:
        server.batches.expire_after = 2
        requests = [BatchRequest(f"r{i}", MODEL, _ask(f"q{i}"), _options(server)) for i in range(3)]

        async def run() -> tuple[list[Any], int, list[Any]]:
            job = await submit(requests, store=tmp_path, name="fates", settings=_settings(server))
            first = await job.collect(interval=0.02, timeout=20)
            server.batches.expiry = None
            again = await job.resubmit_expired()
            return first, again, await job.collect(interval=0.02, timeout=20)

        first, again, second = anyio.run(run)

    assert [r.outcome for r in first] == ["succeeded", "errored", "expired"]
    errored, expired = first[1].message, first[2].message
    assert errored.error is not None and errored.error.kind == "overloaded"
    assert expired.error is not None and expired.error.kind == "expired"
    assert again == 1
    assert [r.outcome for r in second] == ["succeeded", "errored", "succeeded"]
    assert second[2].message.text() == "later"


def test_a_cancelled_job_gives_aborted_messages(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["never"] * 2}, batch_delay=3600) as server:
        requests = [BatchRequest(f"c{i}", MODEL, _ask("q"), _options(server)) for i in range(2)]

        async def run() -> list[Any]:
            job = await submit(requests, store=tmp_path, name="cancel", settings=_settings(server))
            await job.cancel()
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    error = results[0].message.error
    assert error is not None and error.kind == "aborted"


def test_a_batch_without_a_bucket_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["x"]}, batch_delay=3600) as server:
        requests = [BatchRequest("b", MODEL, _ask("q"), _options(server))]
        with pytest.raises(ValueError, match=r"BatchSettings\.bucket"):
            anyio.run(lambda: submit(requests, store=tmp_path, name="nobucket"))
        assert server.batches.created == 0


def test_listing_pages_and_find_matches_the_display_name() -> None:
    with fake_vendor(scenarios={MODEL.id: ["a"] * 4}, batch_delay=3600) as server:
        session = _session(server)
        model = session.model

        def part(tag: str) -> BatchPart:
            request = plan_call(WIRE, model, Context(messages=[UserMessage(content=tag)])).request  # type: ignore[arg-type]
            return BatchPart(tag, model, [codec.line(f"{tag}_0", request, model)])

        async def run() -> tuple[list[str], list[str], list[str]]:
            try:
                made = [await codec.submit(session, part(f"t{i}")) for i in range(5)]
                return (
                    made,
                    await codec.find(session, part("t3"), 0.0),
                    [s.id async for s in codec.listing(session)],
                )
            finally:
                await session.aclose()

        made, found, listed = anyio.run(run)
        found_all = anyio.run(
            lambda: vendor_batches(model, options=StreamOptions(api_key=KEY), limit=3)
        )
    assert found == [made[3]]
    assert listed == made[::-1]  # newest first
    assert [s.id for s in found_all] == made[::-1][:3]


# --- 3. lines without their key, and hostile bytes -------------------------------------------


def _ended_job(server: FakeVendor, n: int) -> tuple[HttpSession, BatchStatus, list[str]]:
    """A job of `n` requests, ended, its results written."""
    session = _session(server)
    model = session.model
    lines = []
    for i in range(n):
        ctx = Context(messages=[UserMessage(content=f"question {i % 3}")])  # repeats
        lines.append(codec.line(f"k_{i}", plan_call(WIRE, model, ctx).request, model))  # type: ignore[arg-type]

    async def run() -> BatchStatus:
        job_id = await codec.submit(session, BatchPart("echo", model, lines))
        return await codec.status(session, job_id)

    status = anyio.run(run)
    assert status.state == "ended"
    return session, status, [ln["key"] for ln in lines]


def _results(session: HttpSession, status: BatchStatus) -> list[RawResult]:
    async def run() -> list[RawResult]:
        try:
            return [r async for r in codec.results(session, status)]
        finally:
            await session.aclose()

    return anyio.run(run)


def test_lines_without_their_key_are_matched_by_the_request_they_echo() -> None:
    answers = [faux_text(f"answer {i}") for i in range(6)]
    with fake_vendor(scenarios={MODEL.id: answers}, batch_delay=0.0) as server:
        session, status, keys = _ended_job(server, 6)
        (uri,) = [i for i in _objects(server) if i.endswith("predictions.jsonl")]
        lines = [json.loads(x) for x in _objects(server)[uri].splitlines()]
        want = {ln["key"]: ln["response"] for ln in lines}
        for ln in lines:
            del ln["key"]
            ln["request"] = {  # echoed with its keys in another case and order
                "generation_config" if k == "generationConfig" else k: v
                for k, v in reversed(list(ln["request"].items()))
            }
        random.Random(7).shuffle(lines)
        lines.append({"request": {"contents": []}, "response": {}, "status": ""})  # no match
        server.batches.put_file("\n".join(map(json.dumps, lines)).encode(), name="p", id=uri)
        # A restarted process whose journal kept nothing: the job says where things are.
        found = _results(_session(server, recorded={}), status)
    by_id = {r.custom_id: r for r in found}
    assert sorted(k for k in by_id if k) == sorted(keys) and len(found) == 7
    for k in keys:  # identical requests are interchangeable: same question, same answer
        assert by_id[k].outcome == "succeeded"
        question = int(k[2:]) % 3
        assert by_id[k].body in [want[f"k_{i}"] for i in range(6) if i % 3 == question]
    assert (by_id[""].outcome, by_id[""].kind) == ("errored", "protocol")


HOSTILE = [
    b"not json",
    b"[1, 2]",
    b'{"key": "k_0", "response": "text", "status": ""}',
    b'{"key": "k_1", "status": "Too Many Requests: {\\"error\\": {\\"code\\": 429}}"}',
    b'{"key": "k_2", "status": {"code": 3, "message": "bad"}}',
    b'{"key": "k_3", "status": 12}',
    b'{"key": "k_4"}',
    b'{"key": "k_5", "response": {"candidates": 5}, "status": ""}',
    b'{"key": "k_5", "response": {}, "status": ""}',
    b'{"key": "stranger", "response": {}, "status": ""}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"key": "k_6", "status": "RESOURCE_EXHAUSTED somewhere in the text"}',
]


class _Canned:
    """A session answering a listing of one object, and that object's bytes."""

    model = MODEL.replace(base_url="https://x.test" + WHERE + "/publishers/google")
    settings = BatchSettings(storage_url="https://storage.test", bucket=BUCKET)

    def __init__(self, body: bytes, keys: list[str]) -> None:
        self.body = body
        self.recorded = {"keys": pack_keys(keys), "gcs_bucket": BUCKET, "gcs_output": "o"}

    async def send(self, method: str, url: str, **kw: Any) -> httpx.Response:
        if (kw.get("params") or {}).get("prefix"):
            return httpx.Response(200, json={"items": [{"name": "o/p/predictions.jsonl"}]})
        return httpx.Response(200, content=self.body)

    def record(self, **fields: Any) -> None:
        self.recorded.update(fields)

    def url(self, path: str) -> str:
        return "https://x.test/" + path


@pytest.mark.parametrize("body", [b"not json", b"[" * 100_000 + b"]" * 100_000, b"[]"])
def test_a_job_answer_that_is_not_a_job_is_a_protocol_error(body: bytes) -> None:
    with pytest.raises(BatchHTTPError) as caught:
        anyio.run(codec.status, _Canned(body, []), "123")
    assert caught.value.kind == "protocol"


@pytest.mark.parametrize("body", [b"not json", b"[" * 100_000 + b"]" * 100_000, b"[]"])
def test_an_object_listing_that_is_not_one_lists_nothing(body: bytes) -> None:
    class Listing(_Canned):
        async def send(self, method: str, url: str, **kw: Any) -> httpx.Response:
            return httpx.Response(200, content=self.body)  # the listing too

    async def listed() -> list[str]:
        return [n async for n in _gcs.listing(Listing(body, []), BUCKET, "o/")]

    assert anyio.run(listed) == []


def test_hostile_lines_never_raise_and_every_request_has_one_result() -> None:
    keys = [f"k_{i}" for i in range(8)]
    status = BatchStatus(id="1", state="ended", vendor_state="JOB_STATE_SUCCEEDED")

    async def read() -> list[RawResult]:
        return [r async for r in codec.results(_Canned(b"\n".join(HOSTILE), keys), status)]

    found = anyio.run(read)
    by_id: dict[str, list[RawResult]] = {}
    for r in found:
        by_id.setdefault(r.custom_id, []).append(r)
    assert sorted(k for k in by_id if k) == keys
    assert all(len(v) == 1 for k, v in by_id.items() if k)
    assert len(by_id[""]) == 4  # not JSON, not an object, a stranger, too deep
    for k in ("k_0", "k_4", "k_7"):
        assert (by_id[k][0].outcome, by_id[k][0].kind) == ("errored", "protocol"), k
    assert (by_id["k_1"][0].kind, by_id["k_1"][0].status) == ("rate_limit", 429)
    assert by_id["k_2"][0].kind == "invalid_request"
    assert by_id["k_3"][0].outcome == "errored"
    assert by_id["k_5"][0].outcome == "succeeded"
    assert by_id["k_6"][0].kind == "rate_limit"


@pytest.mark.parametrize(
    "job",
    [
        {"name": "projects/p/locations/l/batchPredictionJobs/1", "state": 5,
         "completionStats": {"successfulCount": "9" * 40, "failedCount": -2},
         "createTime": "yesterday", "outputInfo": {"gcsOutputDirectory": "http://evil.test/x"}},
        {"name": "projects/p/locations/l/batchPredictionJobs/1", "completionStats": [1],
         "inputConfig": {"gcsSource": {"uris": ["gs://a/b", "gs://c/d"]}}, "displayName": 3},
    ],
)  # fmt: skip
def test_a_hostile_job_reads_as_a_running_job(job: dict[str, Any]) -> None:
    back = codec._status(job)
    assert back is not None and back.state == "running" and back.id == "1"
    assert back.counts.succeeded == back.counts.errored == 0
    assert back.created_at is None and back.where == {} and back.tag is None


@pytest.mark.parametrize(
    "name", [None, 5, "", "projects/p/locations/l/batchPredictionJobs/../x", "1", "a/b"]
)
def test_a_job_without_a_usable_name_is_not_read(name: Any) -> None:
    assert codec._status({"name": name, "state": "JOB_STATE_RUNNING"}) is None


def test_results_never_leave_the_part_s_bucket() -> None:
    status = BatchStatus(
        id="1", state="ended", vendor_state="JOB_STATE_SUCCEEDED",
        where={"output": "gs://other-bucket/o/p", "output_prefix": "gs://other-bucket/o",
               "input": "gs://other-bucket/in.jsonl"},
    )  # fmt: skip
    session: Any = _Canned(b"", [])
    session.recorded = {}
    assert codec._folder(session, status) is None
    assert codec._object(session, "gcs_input", status.where["input"]) is None
