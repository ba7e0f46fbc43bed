"""Bedrock batch inference from the user's side: jobs through `stream_core.batch` against
the fake control plane, the S3 side real (moto's server mode on loopback, objects really
written and read). Each result is the message `stream()` gives for the same script at half
the cost; errors, timeouts and stops are messages with their kinds; a crash after the
create is found by the job's name; hostile output lines never raise and never lose a row.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from moto_server import CREDENTIALS, MotoServer

from stream_core import (
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    Usage,
    UserMessage,
    complete,
    get_model,
)
from stream_core.batch import BatchHTTPError, BatchRequest, BatchSettings, submit, vendor_batches
from stream_core.batch._session import HttpSession
from stream_core.provider import BatchPart, BatchStatus, plan, read_whole
from stream_core.providers import _aws, _bedrock_batch, _bedrock_jobs, _s3
from stream_core.providers._bedrock_whole import answer_body
from stream_core.providers.bedrock import WIRE
from stream_core.testing import FakeVendor, fake_vendor, faux_error, faux_message, faux_text
from stream_core.testing._batch_routes_bedrock import use_s3

MODEL_ID = "anthropic.claude-haiku-4-5-20251001-v1:0"
ROLE = "arn:aws:iam::123456789012:role/stream-core-batch"
USAGE = Usage(input=12, output=7, cache_read=5, cache_write=2)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
WEATHER = Tool(
    name="get_weather",
    description="The weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    server = MotoServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS.secret_access_key)
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.fixture
def few(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs of a few records (Bedrock's own minimum is 100)."""
    monkeypatch.setattr(
        _bedrock_batch, "BATCH", dataclasses.replace(_bedrock_batch.BATCH, min_requests=1)
    )


@pytest.fixture
def bucket(moto: MotoServer) -> Iterator[_s3.BlockingS3]:
    s3 = moto.bucket(f"sc-{uuid.uuid4().hex[:16]}")
    try:
        yield s3
    finally:
        s3.client.close()


def _settings(moto: MotoServer, bucket: _s3.BlockingS3, **kw: Any) -> BatchSettings:
    return BatchSettings(
        storage_url=moto.url, bucket=bucket.s3.bucket, role_arn=ROLE, prefix="runs/eval", **kw
    )


def _model() -> Model:
    return get_model("amazon-bedrock", MODEL_ID)


def _thinking() -> Any:
    message = AssistantMessage(
        api="faux", provider="faux", model="faux", usage=USAGE,
        content=[ThinkingContent(thinking="Let me think.", signature="c2lnbmF0dXJl"),
                 TextContent(text="Done thinking.")],
    )  # fmt: skip
    return faux_message(message)


def _scripted() -> list[Any]:
    call = AssistantMessage(
        api="faux", provider="faux", model="faux", usage=USAGE,
        content=[TextContent(text="Checking."),
                 ToolCall(id="tooluse_1", name="get_weather", arguments={"city": "Paris"})],
    )  # fmt: skip
    return [faux_text("Hello there.", usage=USAGE), faux_message(call),
            faux_text('{"answer": 42}', usage=USAGE), _thinking()]  # fmt: skip


def _requests(url: str) -> list[BatchRequest]:
    model = _model()
    ask = Context(messages=[UserMessage(content="What is up?")])
    tools = Context(messages=[UserMessage(content="Weather in Paris?")], tools=[WEATHER])
    base = StreamOptions(base_url=url, max_tokens=2000)
    return [
        BatchRequest("text", model, ask, base),
        BatchRequest("tool", model, tools, dataclasses.replace(base, tool_choice="auto")),
        BatchRequest("json", model, ask, dataclasses.replace(base, output_schema=SCHEMA)),
        BatchRequest("think", model, ask, dataclasses.replace(base, reasoning="low")),
    ]


def _run(coro: Any) -> Any:
    async def main() -> Any:
        return await coro

    return anyio.run(main)


def _same(batch: AssistantMessage, streamed: AssistantMessage) -> None:
    assert batch.content == streamed.content
    assert (batch.stop_reason, batch.raw_stop_reason) == (
        streamed.stop_reason,
        streamed.raw_stop_reason,
    )
    assert batch.error == streamed.error
    assert (batch.output, batch.output_mode) == (streamed.output, streamed.output_mode)
    for name in ("input", "output", "cache_read", "cache_write", "reasoning", "total_tokens"):
        assert getattr(batch.usage, name) == getattr(streamed.usage, name), name
    assert batch.usage.cost is not None and streamed.usage.cost is not None
    assert batch.usage.cost.total == pytest.approx(streamed.usage.cost.total / 2)


# --- end to end -----------------------------------------------------------------------------


def test_a_job_gives_the_messages_stream_gives_at_half_the_cost(
    moto: MotoServer, bucket: _s3.BlockingS3, few: None, tmp_path: Path
) -> None:
    with fake_vendor(scenarios={MODEL_ID: _scripted()}, batch_delay=0.05) as fake:
        use_s3(fake, moto.url)
        requests = _requests(fake.url)

        async def run() -> list[Any]:
            job = await submit(requests, store=tmp_path, name="eval", settings=_settings(
                moto, bucket, delete_files=False))  # fmt: skip
            return await job.collect(interval=0.05, timeout=30)

        results = _run(run())
        assert fake.batches.created == 1
    with fake_vendor(scenarios={MODEL_ID: _scripted()}) as again:
        streamed = [_run(complete(r.model, r.context, r.options)) for r in _requests(again.url)]
        sent = [r.body for r in again.requests if r.path.endswith("/converse-stream")]
    assert [r.custom_id for r in results] == ["text", "tool", "json", "think"]
    assert [r.outcome for r in results] == ["succeeded"] * 4
    for result, message in zip(results, streamed, strict=True):
        _same(result.message, message)
    assert results[1].message.content[1] == ToolCall(
        id="tooluse_1", name="get_weather", arguments={"city": "Paris"}
    )
    assert results[2].message.output == {"answer": 42}
    assert isinstance(results[3].message.content[0], ThinkingContent)

    # The S3 side is real: the input's records are the Converse bodies stream() sends.
    keys = bucket.keys("runs/eval/")
    (input_key,) = [k for k in keys if k.endswith("/input.jsonl")]
    records = [json.loads(x) for x in (bucket.get(input_key) or b"").splitlines()]
    assert [record["modelInput"] for record in records] == sent  # the bodies stream() sent
    for record, request in zip(records, requests, strict=True):
        p = plan(WIRE, request.model, request.context, request.options)
        assert record["modelInput"] == p.request.payload
        assert _bedrock_jobs.custom_id_of(record["recordId"]) is not None
    job_id = _bedrock_jobs.job_id(results[0].batch_id)
    folder = input_key.rsplit("/", 1)[0] + f"/out/{job_id}/"
    assert sorted(k for k in keys if k.startswith(folder)) == [
        folder + "input.jsonl.out",
        folder + "manifest.json.out",
    ]
    lines = [json.loads(x) for x in (bucket.get(folder + "input.jsonl.out") or b"").splitlines()]
    assert [line["modelInput"] for line in lines] == [r["modelInput"] for r in records]
    manifest = json.loads(bucket.get(folder + "manifest.json.out") or b"{}")
    assert manifest["totalRecordCount"] == manifest["successRecordCount"] == 4


def test_collected_objects_are_deleted(
    moto: MotoServer, bucket: _s3.BlockingS3, few: None, tmp_path: Path
) -> None:
    with fake_vendor(scenarios={MODEL_ID: ["One.", "Two."]}, batch_delay=0.05) as fake:
        use_s3(fake, moto.url)

        async def run() -> list[Any]:
            job = await submit(_requests(fake.url)[:2], store=tmp_path, name="tidy",
                               settings=_settings(moto, bucket))  # fmt: skip
            assert bucket.keys("runs/") != []  # the input is there while the job runs
            return await job.collect(interval=0.05, timeout=30)

        results = _run(run())
    assert [r.message.text() for r in results] == ["One.", "Two."]
    assert bucket.keys("") == []


def test_errored_records_keep_their_kind(
    moto: MotoServer, bucket: _s3.BlockingS3, few: None, tmp_path: Path
) -> None:
    answers: list[Any] = ["Fine.", faux_error("rate_limit", "slow down"), faux_error("overloaded")]
    with fake_vendor(scenarios={MODEL_ID: answers}, batch_delay=0.05) as fake:
        use_s3(fake, moto.url)
        reqs = _requests(fake.url)[:1] * 3
        reqs = [dataclasses.replace(r, custom_id=f"r{i}") for i, r in enumerate(reqs)]

        async def run() -> list[Any]:
            job = await submit(reqs, store=tmp_path, name="errs", settings=_settings(moto, bucket))
            return await job.collect(interval=0.05, timeout=30)

        results = _run(run())
    assert [r.outcome for r in results] == ["succeeded", "errored", "errored"]
    kinds = [r.message.error.kind if r.message.error else None for r in results]
    assert kinds == [None, "rate_limit", "overloaded"]
    assert "slow down" in (results[1].message.error.message if results[1].message.error else "")


@pytest.mark.parametrize("answered", [0, 1])
def test_a_timed_out_job_gives_expired_records_that_can_be_resubmitted(
    moto: MotoServer, bucket: _s3.BlockingS3, few: None, tmp_path: Path, answered: int
) -> None:
    with fake_vendor(scenarios={MODEL_ID: ["A.", "B.", "C."]},
                     batch_delay=0.3, batch_expiry=0.05) as fake:  # fmt: skip
        use_s3(fake, moto.url)
        fake.batches.expire_after = answered
        reqs = [dataclasses.replace(_requests(fake.url)[0], custom_id=f"e{i}") for i in range(2)]

        async def run() -> tuple[list[Any], list[Any], list[BatchStatus]]:
            job = await submit(reqs, store=tmp_path, name="late", settings=_settings(moto, bucket))
            first = await job.collect(interval=0.05, timeout=30)
            listed = await vendor_batches(
                reqs[0].model, options=reqs[0].options, settings=_settings(moto, bucket)
            )
            fake.batches.expiry = None
            assert await job.resubmit_expired() == 2 - answered
            return first, await job.collect(interval=0.05, timeout=30), listed

        first, second, listed = _run(run())
    word = _bedrock_jobs.EXPIRED if answered == 0 else _bedrock_jobs.PARTIAL
    assert listed[0].vendor_state == word and listed[0].state == "ended"
    assert [r.outcome for r in first] == ["succeeded"] * answered + ["expired"] * (2 - answered)
    assert all(r.message.error and r.message.error.kind == "expired" for r in first[answered:])
    assert [r.outcome for r in second] == ["succeeded", "succeeded"]


def test_a_stopped_job_gives_cancelled_records(
    moto: MotoServer, bucket: _s3.BlockingS3, few: None, tmp_path: Path
) -> None:
    with fake_vendor(scenarios={MODEL_ID: ["A.", "B."]}, batch_delay=60) as fake:
        use_s3(fake, moto.url)
        reqs = _requests(fake.url)[:2]

        async def run() -> list[Any]:
            job = await submit(reqs, store=tmp_path, name="stop", settings=_settings(moto, bucket))
            assert (await job.poll()).state == "running"
            await job.cancel()
            await job.cancel()  # a job already stopped: no error
            return await job.collect(interval=0.05, timeout=30)

        results = _run(run())
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    assert all(r.message.error and r.message.error.kind == "aborted" for r in results)


def test_a_crash_after_the_create_is_found_by_the_job_name(
    moto: MotoServer, bucket: _s3.BlockingS3, few: None, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    class Crash(BaseException):
        pass

    real = _bedrock_batch.BATCH

    async def dies(session: Any, part: BatchPart) -> str:
        await real.submit(session, part)
        raise Crash  # killed before the job's id was recorded

    with fake_vendor(scenarios={MODEL_ID: ["A.", "B."]}, batch_delay=0.05) as fake:
        use_s3(fake, moto.url)
        reqs = _requests(fake.url)[:2]
        settings = _settings(moto, bucket)
        monkeypatch.setattr(_bedrock_batch, "BATCH", dataclasses.replace(real, submit=dies))
        with pytest.raises(Crash):
            _run(submit(reqs, store=tmp_path, name="crash", settings=settings))
        monkeypatch.setattr(_bedrock_batch, "BATCH", real)

        async def again() -> list[Any]:
            job = await submit(reqs, store=tmp_path, name="crash", settings=settings)
            return await job.collect(interval=0.05, timeout=30)

        results = _run(again())
        assert fake.batches.created == 1
    assert [r.message.text() for r in results] == ["A.", "B."]


def test_a_create_sent_twice_makes_one_job(
    moto: MotoServer, bucket: _s3.BlockingS3, tmp_path: Path
) -> None:
    with fake_vendor(scenarios={MODEL_ID: ["A."]}, batch_delay=5) as fake:
        use_s3(fake, moto.url)

        async def run(session: HttpSession, part: BatchPart) -> None:
            first = await _bedrock_batch.submit(session, part)
            second = await _bedrock_batch.submit(session, part)
            assert first == second and fake.batches.created == 1
            assert await _bedrock_batch.find(session, part, 0.0) == [first]
            listed = await _collect(_bedrock_batch.listing(session))
            assert [s.id for s in listed] == [first] and listed[0].tag == "sctwice0p0"

        _in_session(fake, moto, bucket, "sctwice0p0", run)


# --- refusals -------------------------------------------------------------------------------


def test_fewer_records_than_bedrock_takes_are_refused(
    moto: MotoServer, bucket: _s3.BlockingS3, tmp_path: Path
) -> None:
    reqs = _requests("http://127.0.0.1:9")[:3]
    with pytest.raises(ValueError, match="at least 100 requests .* has 3"):
        _run(submit(reqs, store=tmp_path, name="small", settings=_settings(moto, bucket)))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"role_arn": None}, "BatchSettings.role_arn"),
        ({"bucket": None}, "BatchSettings.bucket"),
        ({"bucket": "Not_A_Bucket"}, "BatchSettings.bucket"),
        ({"prefix": "a b"}, "BatchSettings.prefix"),
        ({"window_hours": 12}, "BatchSettings.window_hours"),
    ],
)
def test_missing_settings_are_named(
    moto: MotoServer, bucket: _s3.BlockingS3, tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    with fake_vendor(scenarios={MODEL_ID: ["A."]}) as fake:

        async def run(session: HttpSession, part: BatchPart) -> None:
            session.settings = dataclasses.replace(session.settings, **change)
            with pytest.raises(ValueError, match=named):
                await _bedrock_batch.submit(session, part)

        _in_session(fake, moto, bucket, "scset0p0", run)
        assert fake.batches.created == 0


def test_a_full_queue_is_a_rate_limit(
    moto: MotoServer, bucket: _s3.BlockingS3, tmp_path: Path
) -> None:
    with fake_vendor(scenarios={MODEL_ID: ["A."]}) as fake:
        use_s3(fake, moto.url)
        fake.batches.queue_limit = 0

        async def run(session: HttpSession, part: BatchPart) -> None:
            with pytest.raises(BatchHTTPError) as caught:
                await _bedrock_batch.submit(session, part)
            assert caught.value.kind == "rate_limit" and caught.value.status == 400

        _in_session(fake, moto, bucket, "scfull0p0", run)


def test_no_s3_credentials_is_an_auth_error(
    moto: MotoServer, bucket: _s3.BlockingS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-value")
    with fake_vendor(scenarios={MODEL_ID: ["A."]}) as fake:

        async def run(session: HttpSession, part: BatchPart) -> None:
            with pytest.raises(BatchHTTPError) as caught:
                await _bedrock_batch.submit(session, part)
            assert caught.value.kind == "auth"
            assert "bedrock-api-key-value" not in caught.value.message

        _in_session(fake, moto, bucket, "scauth0p0", run)


# --- lines, answers, hostile outputs ---------------------------------------------------------


def _in_session(
    fake: FakeVendor, moto: MotoServer, bucket: _s3.BlockingS3, tag: str, run: Any
) -> None:
    """`run(session, part)` with a codec session of the engine's and a part of 2 records."""
    model = _model().model_copy(update={"base_url": fake.url})
    request = _requests(fake.url)[0]
    p = plan(WIRE, request.model, request.context, request.options)
    lines = [_bedrock_batch.line(f"{tag}_{i}", p.request, p.model) for i in range(2)]
    part = BatchPart(tag, model, lines, {}, p.request.url)

    async def main() -> None:
        session = HttpSession(WIRE, model, StreamOptions(), _settings(moto, bucket), None, None)
        try:
            await run(session, part)
        finally:
            await session.aclose()

    anyio.run(main)


async def _collect(items: Any) -> list[Any]:
    return [x async for x in items]


def test_record_ids_are_alphanumeric_and_read_back() -> None:
    for vid in ["sc0a1b2c3d4ep0_0", "a-b_c", "Z", "ZZu_-Zd", "x" * 64]:
        rid = _bedrock_jobs.record_id(vid)
        assert rid.isalnum() and _bedrock_jobs.custom_id_of(rid) == vid
    for junk in [None, 3, "", "Zq", "a_b", "Z", "é", "x" * 301, ["a"]]:
        assert _bedrock_jobs.custom_id_of(junk) is None
    with pytest.raises(ValueError):
        _bedrock_jobs.record_id("a b")


def test_a_record_is_the_converse_body_stream_sends() -> None:
    for request in _requests("http://127.0.0.1:9"):
        p = plan(WIRE, request.model, request.context, request.options)
        record = _bedrock_batch.line("sc1p0_7", p.request, p.model)
        assert record == {"recordId": "sc1p0Zu7", "modelInput": p.request.payload}
        assert "modelId" not in record["modelInput"] and "stream" not in record["modelInput"]


@pytest.mark.parametrize(
    "message",
    [
        AssistantMessage(api="x", provider="x", model="x", usage=USAGE, stop_reason="length",
                         raw_stop_reason="max_tokens", content=[TextContent(text="cut")]),
        AssistantMessage(api="x", provider="x", model="x", stop_reason="tool_use",
                         content=[ToolCall(id="t1", name="f", arguments={"a": [1, {"b": None}]})]),
        AssistantMessage(api="x", provider="x", model="x", content=[
            ThinkingContent(thinking="", signature="ZW5jcnlwdGVk", redacted=True),
            TextContent(text="after")]),
    ],
)  # fmt: skip
def test_answer_body_reads_back_as_the_message(message: AssistantMessage) -> None:
    request = _requests("http://127.0.0.1:9")[0]
    p = plan(WIRE, request.model, request.context, request.options)
    back = read_whole(p, answer_body(message, p.model))
    assert back.content == message.content
    assert back.stop_reason == message.stop_reason
    assert (back.usage.input, back.usage.output, back.usage.cache_read) == (
        message.usage.input, message.usage.output, message.usage.cache_read)  # fmt: skip


HOSTILE_LINES = [
    b"not json at all",
    b'{"recordId": "sc9p0Zu0", "modelInput": {}, "modelOutput": "a string"',  # cut
    b'{"recordId": "sc9p0Zu1", "modelInput": {}, "modelOutput": []}',
    b'{"recordId": 7, "modelOutput": {}}',
    b'{"recordId": "sc9p0Zu2", "error": {"errorCode": true, "errorMessage": ["x"]}}',
    b'{"recordId": "sc9p0Zu3", "error": "plain words"}',
    b'{"recordId": "sc9p0Zu4"}',
    b"[1, 2, 3]",
    b'{"recordId": "sc9p0Zu5", "modelOutput": {"output": {"message": {"content": 5}}}}',
    b'{"recordId": "sc9p0Zu6", "error": {"errorCode": 429, "errorMessage": "Too many"}}',
    b'{"recordId": "sc9p0Zu6", "modelOutput": {}}',  # a second line for one record
    b"\xff\xfe garbage",
]


def test_hostile_output_lines_never_raise_and_lose_no_record(
    moto: MotoServer, bucket: _s3.BlockingS3, tmp_path: Path
) -> None:
    ids = [f"sc9p0_{i}" for i in range(9)]
    source = b"".join(
        json.dumps({"recordId": _bedrock_jobs.record_id(v), "modelInput": {}}).encode() + b"\n"
        for v in ids
    )
    bucket.put("runs/eval/sc9p0/input.jsonl", source)
    bucket.put("runs/eval/sc9p0/out/abcdefghijkl/input.jsonl.out", b"\n".join(HOSTILE_LINES))
    status = _bedrock_jobs.read_status(
        {"jobArn": "arn:aws:bedrock:us-east-1:000000000000:model-invocation-job/abcdefghijkl",
         "status": _bedrock_jobs.COMPLETED, "totalRecordCount": 9}
    )  # fmt: skip
    got: list[Any] = []

    async def run(session: HttpSession, part: BatchPart) -> None:
        session.record(
            bucket=bucket.s3.bucket, storage_url=moto.url, region="us-east-1",
            input_key="runs/eval/sc9p0/input.jsonl", output_prefix="runs/eval/sc9p0/out/",
            key_base="runs/eval/sc9p0",
        )  # fmt: skip
        got.extend(await _collect(_bedrock_batch.results(session, status)))
        await _bedrock_batch.cleanup(session, status)

    with fake_vendor(scenarios={MODEL_ID: ["A."]}) as fake:
        _in_session(fake, moto, bucket, "sc9p0", run)
    by_id = {r.custom_id: r for r in got}
    assert sorted(by_id) == ids and len(got) == len(ids)
    assert by_id["sc9p0_0"].kind == "protocol"
    assert by_id["sc9p0_5"].outcome == "succeeded"  # the provider's reader judges its body
    assert (by_id["sc9p0_6"].kind, by_id["sc9p0_6"].status) == ("rate_limit", 429)
    assert by_id["sc9p0_3"].message == "plain words"
    assert by_id["sc9p0_7"].kind == "protocol"  # no line at all: read from the input
    assert bucket.keys("runs/") == []


@pytest.mark.parametrize(
    "data",
    [None, [], "x", {"jobArn": 5}, {"jobArn": "a", "status": 3, "totalRecordCount": -1},
     {"jobArn": "a", "status": "Stopped", "totalRecordCount": 10**20, "successRecordCount": 2},
     {"jobArn": "a", "status": "Completed", "successRecordCount": True, "submitTime": "zz",
      "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "http://x"}}, "message": ["m"]},
     {"jobArn": "a", "status": "Stopped", "totalRecordCount": 5, "successRecordCount": 3,
      "errorRecordCount": 1, "submitTime": "2026-01-02T03:04:05Z"}],
)  # fmt: skip
def test_hostile_job_objects_read_or_name_the_problem(data: Any) -> None:
    try:
        s = _bedrock_jobs.read_status(data)
    except BatchHTTPError as exc:
        assert exc.kind == "protocol"
        return
    c = s.counts
    assert 0 <= c.succeeded + c.errored + c.expired + c.cancelled <= c.total
    if data.get("submitTime") == "2026-01-02T03:04:05Z":
        assert c.cancelled == 1 and s.state == "ended" and s.created_at == 1767323045.0


# --- endpoints and signing -------------------------------------------------------------------


class _Bare:
    def __init__(self, base_url: str, **settings: Any) -> None:
        self.model = _model().model_copy(update={"base_url": base_url})
        self.settings = BatchSettings(**settings)
        self.recorded: dict[str, Any] = {}


@pytest.mark.parametrize(
    ("base", "settings", "control"),
    [
        ("https://bedrock-runtime.eu-west-1.amazonaws.com", {}, "https://bedrock.eu-west-1.amazonaws.com"),
        ("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com", {},
         "https://bedrock-fips.us-gov-west-1.amazonaws.com"),
        ("https://bedrock-runtime.cn-north-1.amazonaws.com.cn", {},
         "https://bedrock.cn-north-1.amazonaws.com.cn"),
        ("http://127.0.0.1:8080/proxy", {}, "http://127.0.0.1:8080/proxy"),
        ("https://bedrock-runtime.eu-west-1.amazonaws.com", {"control_url": "https://vpce.example/"},
         "https://vpce.example"),
    ],
)  # fmt: skip
def test_the_control_plane_is_beside_the_runtime(
    base: str, settings: dict[str, Any], control: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION")
    got, region = _bedrock_batch._control(_Bare(base, **settings))  # type: ignore[arg-type]
    assert got == control
    assert region in base or base.startswith("http://127.0.0.1") and region == "us-east-1"


def test_s3_requests_are_signed_as_aws_documents() -> None:
    # The Amazon S3 API reference's Signature Version 4 examples (GET Bucket lifecycle and
    # list objects, examplebucket, 2013-05-24).
    import datetime

    keys = _aws.Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    when = datetime.datetime(2013, 5, 24, tzinfo=datetime.UTC)
    for url, signature in [
        ("https://examplebucket.s3.amazonaws.com/?lifecycle",
         "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
        ("https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
         "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
    ]:  # fmt: skip
        request = httpx.Request("GET", url)
        assert _aws.sign_request(request, keys, region="us-east-1", service="s3", now=when) == (
            signature
        )
        assert "x-amz-content-sha256" in request.headers["authorization"]


def test_a_key_is_encoded_once_for_s3() -> None:
    s3 = _s3.S3("http://127.0.0.1:1", "bkt", "us-east-1", CREDENTIALS)
    assert s3.url("a/b!(c)'*.jsonl") == "http://127.0.0.1:1/bkt/a/b%21%28c%29%27%2A.jsonl"
    assert _s3.parse_uri("s3://bkt/a/b.jsonl") == ("bkt", "a/b.jsonl")
    for junk in [None, "http://bkt/a", "s3://BKT/a", "s3://bkt/a b", 5]:
        assert _s3.parse_uri(junk) is None
    with pytest.raises(ValueError):
        _s3.parse_listing(b'<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>')
    keys, token = _s3.parse_listing(
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>true'
        b"</IsTruncated><Contents><Key>a</Key></Contents><NextContinuationToken>t"
        b"</NextContinuationToken></ListBucketResult>"
    )
    assert (keys, token) == (["a"], "t")
