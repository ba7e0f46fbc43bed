"""The batch engine from a demanding user's side (issue 37 review): what is refused at
submission and what is written then, secrets, cancel and resubmit, progress, the order of
stored results, and a job read back by a process without its requests."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from batch_apis import APIS
from memory_codec import Crash, Vendor, install

from stream_core import (
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    Usage,
    UserMessage,
    get_model,
)
from stream_core.batch import BatchRequest, BatchResult, open_job, submit
from stream_core.batch._plans import decode_plan, decode_row, wire_of
from stream_core.provider import (
    BatchHTTPError,
    BatchStatus,
    RawResult,
    batch_wire,
    failed_answer,
    plan,
    read_whole,
)

KEY = "sk-ant-review-SECRET-0123456789"


def _requests(
    n: int, *, keys: tuple[str, ...] = (KEY,), models: tuple[str, ...] = ("claude-haiku-4-5",)
) -> list[BatchRequest]:
    """Request i goes to model i % len(models) with key i % len(keys)."""
    return [
        BatchRequest(
            f"q{i}",
            get_model("anthropic", models[i % len(models)]),
            Context(messages=[UserMessage(content=f"question {i}")]),
            StreamOptions(api_key=keys[i % len(keys)], max_tokens=100),
        )
        for i in range(n)
    ]


def _run(coro: Any) -> Any:
    return anyio.run(lambda: coro)


# --- refusals at submission: named, and nothing written -----------------------------------


@pytest.mark.parametrize(
    ("custom_id", "said"),
    [(None, "None"), (7, "7"), (b"q", "b'q'"), ("", "''"), ("x" * 513, "xxx")],
)
def test_a_bad_custom_id_is_refused_and_nothing_written(
    tmp_path: Path, monkeypatch: Any, custom_id: Any, said: str
) -> None:
    install(monkeypatch, Vendor())
    reqs = _requests(2)
    reqs[1] = replace(reqs[1], custom_id=custom_id)
    with pytest.raises(ValueError, match=rf"custom_id.*{said}"):
        _run(submit(reqs, store=tmp_path / "s", name="job"))
    assert not (tmp_path / "s").exists()


def test_duplicate_ids_none_and_no_batch_api_are_refused(tmp_path: Path, monkeypatch: Any) -> None:
    store = tmp_path / "s"
    reqs = _requests(2)
    with pytest.raises(ValueError, match="'q0' is used twice"):
        _run(submit([reqs[0], reqs[0]], store=store, name="job"))
    with pytest.raises(ValueError, match="at least one request"):
        _run(submit([], store=store, name="job"))
    ollama = Model(id="llama3", api="ollama", provider="ollama", base_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match=r"'q1'.*no batch API.*anthropic.*openai"):
        _run(submit([reqs[0], replace(reqs[1], model=ollama)], store=store, name="job"))
    assert not store.exists()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (StreamOptions(api_key=KEY, max_tokens=10**9), "max_tokens"),
        (StreamOptions(api_key=KEY, tool_choice="required"), "tool_choice"),
        (StreamOptions(api_key=KEY, extra={"nope": 1}), "nope"),
    ],
)
def test_what_stream_refuses_is_refused_naming_id_and_field(
    tmp_path: Path, monkeypatch: Any, options: StreamOptions, field: str
) -> None:
    install(monkeypatch, Vendor())
    reqs = _requests(3)
    reqs[2] = replace(reqs[2], options=options)
    with pytest.raises((ValueError, TypeError), match=rf"'q2'.*{field}"):
        _run(submit(reqs, store=tmp_path, name="job"))
    assert list(tmp_path.iterdir()) == []


def test_no_key_is_refused_before_anything_is_written_or_held(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Like `stream()`, a call with no key never reaches the vendor; here that must be
    known before the job is written and its budget held (an unnamed job left behind
    would hold budget for days under a name the caller never saw)."""
    from stream_core import configure_limits
    from stream_core._limits import limiter
    from stream_core.testing import fake_vendor, faux_text

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
    configure_limits(store=str(tmp_path / "limits.json"), budget_usd=5.0)
    model = get_model("anthropic", "claude-haiku-4-5")
    with fake_vendor(scenarios={model.id: [faux_text("never sent")]}) as server:
        req = BatchRequest(
            "q0",
            model,
            Context(messages=[UserMessage(content="hi")]),
            StreamOptions(base_url=server.url, max_tokens=50),
        )
        with pytest.raises((BatchHTTPError, ValueError), match="API key"):
            _run(submit([req], store=tmp_path / "jobs"))
        assert server.batches.created == 0

    async def held() -> list[Any]:
        view = await limiter.inspect_limits()
        return [r for b in view.budgets for r in b.reservations]

    assert anyio.run(held) == []
    assert not (tmp_path / "jobs").exists() or list((tmp_path / "jobs").iterdir()) == []


# --- secrets ------------------------------------------------------------------------------


def test_no_secret_in_the_job_files_reprs_or_logs(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    install(monkeypatch, Vendor())
    model = get_model("anthropic", "claude-haiku-4-5").model_copy(
        update={"headers": {"authorization": "Bearer model-SECRET-1"}}
    )
    opts = StreamOptions(api_key=KEY, max_tokens=50, headers={"x-api-key": "opt-SECRET-2"})
    reqs = [BatchRequest(f"q{i}", model, Context(messages=[UserMessage(content="hi")]), opts)
            for i in range(2)]  # fmt: skip
    caplog.set_level(logging.DEBUG)

    async def run() -> tuple[Any, list[BatchResult], Any]:
        job = await submit(reqs, store=tmp_path, name="job")
        progress = await job.poll()
        results = await job.collect(interval=0.01)
        session = job._session(job.state.parts[0])
        await session._auth()
        return job, results, (progress, session)

    job, results, (progress, session) = anyio.run(run)
    shown = [repr(job), repr(results), repr(progress), repr(session), str(vars(job))]
    shown += [p.read_text() for p in (tmp_path / "job").iterdir() if p.is_file()]
    shown.append(caplog.text)
    for secret in (KEY, "model-SECRET-1", "opt-SECRET-2"):
        assert not [s for s in shown if secret in s], secret


# --- cancel, resubmit, progress -----------------------------------------------------------


def test_cancel_before_a_part_was_submitted_leaves_no_row_missing(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A submission that died before its second part's create, then `cancel`: that part's
    requests come back `cancelled` (kind `aborted`), never missing."""
    vendor = Vendor()
    install(monkeypatch, vendor)
    reqs = _requests(4, keys=(KEY, KEY + "-2"))  # two parts: two keys
    calls = [0]
    step = vendor.step

    def second_create_dies(name: str) -> None:
        if name == "upload":
            calls[0] += 1
            if calls[0] == 2:
                raise Crash("kill")
        step(name)

    monkeypatch.setattr(vendor, "step", second_create_dies)
    with pytest.raises(Crash):
        _run(submit(reqs, store=tmp_path, name="job"))

    async def then() -> tuple[list[BatchResult], Any]:
        job = open_job(tmp_path, "job")
        await job.cancel()
        results = await job.collect(interval=0.01)
        return results, await job.poll()

    results, progress = anyio.run(then)
    assert sorted(r.custom_id for r in results) == ["q0", "q1", "q2", "q3"]
    assert {r.outcome for r in results} == {"cancelled"}
    assert all(r.message.error and r.message.error.kind == "aborted" for r in results)
    assert progress.state == "collected" and progress.pending == 0
    assert progress.cancelled == 4


def test_progress_after_a_resubmission_counts_each_request_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)

    async def run() -> Any:
        job = await submit(_requests(3), store=tmp_path, name="job")
        vendor.expire = {ln["custom_id"] for b in vendor.batches.values() for ln in b["lines"][1:]}
        await job.collect(interval=0.01)
        vendor.expire = set()
        await job.resubmit_expired()
        await job.collect(interval=0.01)
        return await open_job(tmp_path, "job").poll()

    progress = anyio.run(run)
    assert (progress.total, progress.succeeded, progress.expired, progress.pending) == (3, 3, 0, 0)


def test_resubmit_expired_twice_submits_each_request_once(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)

    async def run() -> tuple[int, int, list[BatchResult]]:
        job = await submit(_requests(3), store=tmp_path, name="job")
        vendor.expire = {ln["custom_id"] for b in vendor.batches.values() for ln in b["lines"][1:]}
        await job.collect(interval=0.01)
        vendor.expire = set()
        vendor.ended = False  # the retry part runs a while
        first = await job.resubmit_expired()
        second = await open_job(tmp_path, "job").resubmit_expired()  # another worker's retry
        vendor.ended = True
        return first, second, await job.collect(interval=0.01)

    first, second, results = anyio.run(run)
    assert (first, second) == (2, 0)
    assert vendor.created == 2
    assert [r.outcome for r in results] == ["succeeded"] * 3


def test_poll_from_another_process_sees_the_job_collected(tmp_path: Path, monkeypatch: Any) -> None:
    install(monkeypatch, Vendor())

    async def run() -> Any:
        job = await submit(_requests(2), store=tmp_path, name="job")
        watcher = open_job(tmp_path, "job")  # a progress display, opened early
        await job.collect(interval=0.01)
        return await watcher.poll()

    progress = anyio.run(run)
    assert (progress.state, progress.succeeded, progress.collected) == ("collected", 2, 2)


def test_stored_results_are_in_submission_order(tmp_path: Path, monkeypatch: Any) -> None:
    install(monkeypatch, Vendor())
    reqs = _requests(6, keys=(KEY, KEY + "-2", KEY + "-3"))  # three parts, interleaved

    async def run() -> tuple[list[BatchResult], list[BatchResult]]:
        job = await submit(reqs, store=tmp_path, name="job")
        return await job.collect(interval=0.01), open_job(tmp_path, "job").stored_results()

    collected, stored = anyio.run(run)
    order = [f"q{i}" for i in range(6)]
    assert [r.custom_id for r in collected] == order
    assert [r.custom_id for r in stored] == order


def test_results_come_as_each_part_ends(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    codec = vendor.codec()
    running: set[str] = set()

    async def status(s: Any, bid: str) -> BatchStatus:
        found = await vendor_status(s, bid)
        return replace(found, state="running") if bid in running else found

    vendor_status = codec.status
    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: replace(codec, status=status))
    reqs = _requests(4, keys=(KEY, KEY + "-2"))

    async def run() -> tuple[list[str], list[str], list[str]]:
        job = await submit(reqs, store=tmp_path, name="job")
        running.add(job.batch_ids[1])
        first = [r.custom_id async for r in job.results()]
        running.clear()
        second = [r.custom_id async for r in job.results()]
        third = [r.custom_id async for r in job.results()]
        return first, second, third

    first, second, third = anyio.run(run)
    assert (sorted(first), sorted(second), third) == (["q0", "q2"], ["q1", "q3"], [])


# --- a job read back by a process without its requests -------------------------------------


def _structured_vendor(vendor: Vendor) -> Any:
    codec = vendor.codec()
    inner = codec.results

    async def odd_results(s: Any, st: BatchStatus) -> Any:
        async for r in inner(s, st):
            if r.body is not None:
                text = json.dumps({"n": 7, "s": "x"})
                body = json.loads(json.dumps(r.body).replace(f"answer {r.custom_id}", "X"))
                body["content"][0]["text"] = text
                body["usage"]["cache_creation_input_tokens"] = 40
                r = replace(r, body=body)
            yield r

    return replace(codec, results=odd_results)


@pytest.mark.parametrize("retention", ["short", "long"])
def test_a_job_collected_by_a_process_without_its_requests_reads_the_same(
    tmp_path: Path, monkeypatch: Any, retention: str
) -> None:
    """Structured output read back, cost at the batch price (1-hour cache writes where
    the endpoint took them), usage clamped: as the submitting process would have."""
    vendor = Vendor(ended=False)
    codec = _structured_vendor(vendor)
    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: codec)
    schema = {
        "title": "answer", "type": "object", "additionalProperties": False,
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}, "required": ["n", "s"],
    }  # fmt: skip
    model = get_model("anthropic", "claude-sonnet-4-5").model_copy(
        update={"base_url": "https://proxy.example.com"}
    )
    opts = StreamOptions(
        api_key=KEY,
        max_tokens=64,
        output_schema=schema,
        cache_retention=retention,  # type: ignore[arg-type]
    )
    reqs = [BatchRequest(f"q{i}", model, Context(messages=[UserMessage(content="hi")]), opts)
            for i in range(2)]  # fmt: skip

    async def run() -> tuple[list[BatchResult], list[BatchResult]]:
        mine = await submit(reqs, store=tmp_path / "a", name="job")
        await submit(reqs, store=tmp_path / "b", name="job")
        vendor.ended = True
        return (
            await mine.collect(interval=0.01),
            await open_job(tmp_path / "b", "job").collect(interval=0.01),
        )

    mine, theirs = anyio.run(run)
    for a, b in zip(mine, theirs, strict=True):
        assert a.message.output == {"n": 7, "s": "x"}
        assert a.message.usage.cost is not None and a.message.usage.cost.cache_write > 0
        same = {"timestamp", "response_id"}  # the vendor's and the clock's
        assert a.message.model_dump(exclude=same) == b.message.model_dump(exclude=same)


def test_decode_plan_reads_every_api_as_the_plan_does() -> None:
    """Every API: the answer read with the plan rebuilt from requests.jsonl is the answer
    read with the plan itself (structured output, reasoning, cache retention, clamps)."""
    from pydantic import BaseModel

    class Out(BaseModel):
        n: int

    for api in APIS:
        m = api.model()
        for kw in ({"output_schema": Out}, {"cache_retention": "long"}, {}):
            o = api.options("https://api.example.com", max_tokens=300, **kw)
            p = plan(wire_of(m), m, Context(messages=[UserMessage(content="hi " * 50)]), o)
            d = decode_plan(json.loads(json.dumps(decode_row("a", "b", 0, p))), p.model)
            codec = batch_wire(p.model)
            assert codec.answer_body is not None
            for usage in (Usage(input=10, output=5, cache_write=9), Usage(input=10**7, output=9)):
                msg = AssistantMessage(
                    api=p.model.api, provider=m.provider, model=m.id, usage=usage,
                    content=[TextContent(text='{"n": 1}')], stop_reason="stop",
                )  # fmt: skip
                body = json.loads(json.dumps(codec.answer_body(msg, p.model)))
                a = read_whole(p, body).model_dump(exclude={"timestamp"})
                b = read_whole(d, body).model_dump(exclude={"timestamp"})
                assert a == b, (api.name, kw)


# --- odd result fields ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        RawResult("v", "errored", kind="nonsense", message={"vendor": "said"}),  # type: ignore[arg-type]
        RawResult("v", "errored", kind=None, message=12345),  # type: ignore[arg-type]
        RawResult("v", "expired", message=None),  # type: ignore[arg-type]
        RawResult("v", "cancelled", message=["x"] * 5000),  # type: ignore[arg-type]
        RawResult("v", "bogus", body=None),  # type: ignore[arg-type]
    ],
)
def test_any_json_in_a_result_is_a_message_never_a_raise(
    tmp_path: Path, monkeypatch: Any, raw: RawResult
) -> None:
    """A codec hands the vendor's values on; whatever they are, the row is written and the
    message is valid, with a kind."""
    vendor = Vendor()
    codec = vendor.codec()

    async def odd_results(s: Any, st: BatchStatus) -> Any:
        for ln in vendor.batches[st.id]["lines"]:
            yield replace(raw, custom_id=ln["custom_id"])

    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: replace(codec, results=odd_results))

    async def run() -> list[BatchResult]:
        job = await submit(_requests(2), store=tmp_path, name="job")
        return await job.collect(interval=0.01)

    results = anyio.run(run)
    assert len(results) == 2
    for r in results:
        AssistantMessage.model_validate(r.message.model_dump(mode="json"))
        assert r.message.stop_reason in ("error", "aborted") and r.message.error is not None
        assert isinstance(r.message.error.message, str) and r.message.error.message


def test_failed_answer_takes_any_value() -> None:
    m = get_model("anthropic", "claude-haiku-4-5")
    p = plan(wire_of(m), m, Context(messages=[UserMessage(content="hi")]), StreamOptions())
    for kind, text in (
        ("nonsense", {"a": 1}),
        (None, None),
        ("server", 7),
        ("expired", "x" * 10**6),
    ):
        message = failed_answer(p, kind, text)  # type: ignore[arg-type]
        assert message.error is not None and isinstance(message.error.message, str)
        assert len(message.error.message) <= 2000


def test_a_vendor_failing_one_cancel_does_not_keep_the_other_parts_running(
    tmp_path: Path, monkeypatch: Any
) -> None:
    vendor = Vendor(ended=False)
    codec = vendor.codec()
    inner = codec.cancel
    first: list[str] = []

    async def flaky_cancel(s: Any, bid: str) -> None:
        if not first:
            first.append(bid)
            raise BatchHTTPError("server", 500, "POST /v1/batches/x/cancel: 500 try later")
        await inner(s, bid)

    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: replace(codec, cancel=flaky_cancel))

    async def run() -> None:
        job = await submit(_requests(4, keys=(KEY, KEY + "-2")), store=tmp_path, name="job")
        with pytest.raises(BatchHTTPError, match="500"):
            await job.cancel()
        # The other part was asked all the same.
        assert [b["cancelled"] for b in vendor.batches.values()].count(True) == 1
        await job.cancel()  # again: the vendor answers now

    anyio.run(run)
    assert all(b["cancelled"] for b in vendor.batches.values())
    assert len(vendor.batches) == 2


def test_a_job_cancelled_before_any_part_was_taken_is_listed_done_with_its_rows(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Killed before its create, then cancelled: `list_jobs` says collected (so `recover`
    leaves it), and its stored results are every request, cancelled."""
    from stream_core.batch import list_jobs

    install(monkeypatch, Vendor(crash_at="upload"))
    with pytest.raises(Crash):
        _run(submit(_requests(2), store=tmp_path, name="job"))
    anyio.run(open_job(tmp_path, "job").cancel)
    ((_, progress),) = list_jobs(tmp_path)
    assert (progress.state, progress.cancelled, progress.pending) == ("collected", 2, 0)
    stored = open_job(tmp_path, "job").stored_results()
    assert [(r.custom_id, r.outcome) for r in stored] == [("q0", "cancelled"), ("q1", "cancelled")]
