"""Batch pains of peers' users (issue 37), each a test from the user's side against the
fake vendor: `stream_core.batch` as an eval fleet drives it. Each test cites where the
pain was reported (an issue or page URL, or a file of ../shared/reference)."""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from batch_apis import API, APIS, KEY, by_name, environment

from stream_core import (
    AssistantMessage,
    Context,
    StreamOptions,
    Tool,
    ToolCall,
    Usage,
    UserMessage,
    complete,
    configure_limits,
    get_model,
    inspect_limits,
)
from stream_core.batch import (
    BatchHTTPError,
    BatchRequest,
    BatchResult,
    BatchSettings,
    list_jobs,
    open_job,
    recover,
    submit,
)
from stream_core.batch._plans import wire_of
from stream_core.provider import plan
from stream_core.testing import FakeVendor, fake_vendor, faux_error, faux_text, faux_tool_call
from stream_core.testing._batch_serve import FakeBatch, FakeResult

USAGE = Usage(input=200, output=40)
WEATHER = Tool(
    name="get_weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
LOCAL = [a for a in APIS if not a.s3]
"""The APIs the fake vendor serves alone (Bedrock needs an S3 server beside it)."""
STREAMING = ("stream", "stream_options")


def _ids(apis: list[API]) -> list[str]:
    return [a.name for a in apis]


def _usable(api: API, monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip an API whose codec has not landed; set the environment it needs."""
    why = api.missing()
    if why is not None:
        pytest.skip(why)
    found, unset = environment(api)
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    for name, value in found.items():
        monkeypatch.setenv(name, value)


def _ask(text: str, tools: list[Tool] | None = None) -> Context:
    return Context(messages=[UserMessage(content=text)], tools=tools or [])


def _requests(api: API, server: FakeVendor, n: int, **more: Any) -> list[BatchRequest]:
    opts = api.options(server.url, max_tokens=200, **more)
    return [BatchRequest(f"q{i}", api.model(), _ask(f"question {i}"), opts) for i in range(n)]


def _only_batch(server: FakeVendor) -> FakeBatch:
    (batch,) = list(server.batches.batches.values())
    return batch


def _end_with(server: FakeVendor, batch: FakeBatch, results: list[FakeResult]) -> None:
    """The vendor ends `batch` with `results` (its order, its gaps, its repeats) before
    anyone reads it. Each result goes with its request (the Vertex fake writes the lines
    in the order of its requests, echoing each)."""
    asked = {c: (c, a, m, p) for c, a, m, p in batch.requests}
    with server.batches.lock:
        batch.requests = [asked[r.custom_id] for r in results]
        batch.results = results


def _answers(server: FakeVendor, batch: FakeBatch) -> list[FakeResult]:
    """What the vendor's scenario answers each request of `batch`, in request order."""
    return [server.batches.answer(c, a, m, p) for c, a, m, p in batch.requests]


def _outcomes(results: list[BatchResult]) -> dict[str, str]:
    return {r.custom_id: r.outcome for r in results}


# --- 1. what goes into a line ----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS, ids=_ids(APIS))
def test_tools_tool_choice_structured_output_and_reasoning_reach_every_batch_line(
    api: API, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The AI SDK's first batch support was text-only: no tools, no tool choice, no
    # structured output (https://github.com/vercel/ai/pull/18346,
    # https://github.com/vercel/ai/pull/19967 "startTextBatch did not accept tool
    # definitions"); xAI's batch lists function calling and response_format as unsupported
    # (https://github.com/xai-org/xai-sdk-python/issues/94); any-llm converts every batch to
    # OpenAI JSONL and loses fields (issue 37; https://github.com/mozilla-ai/any-llm/pull/578);
    # a Gemini batch path dropped the schema the stream path sent
    # (https://github.com/vectorize-io/hindsight/issues/2699). Here each line is the
    # streaming request minus streaming, whatever it carries.
    _usable(api, monkeypatch)
    model = api.model()
    n = api.min_requests()
    turns = [faux_tool_call("get_weather", {"city": "Paris"}, usage=USAGE)] * (n + 1)
    with fake_vendor(scenarios={model.id: turns}, batch_delay=0.05) as server:
        api.prepare(server)
        forced = api.options(server.url, tool_choice={"tool": "get_weather"}, max_tokens=300)
        shaped = api.options(
            server.url,
            output_schema=CITY,
            max_tokens=3000,
            **({"reasoning": "low"} if api.thinking else {}),
        )
        tools = _ask("Weather in Paris?", [WEATHER])
        requests = [
            BatchRequest("forced", model, tools, forced),
            BatchRequest("shaped", model, _ask("Which city?"), shaped),
        ] + [BatchRequest(f"pad{i}", model, tools, forced) for i in range(n - 2)]

        async def run() -> tuple[FakeBatch, list[BatchResult]]:
            job = await submit(
                requests, store=tmp_path, name="lines", settings=api.settings(server.url)
            )
            batch = _only_batch(server)  # kept: collection deletes it at the vendor
            return batch, await job.collect(interval=0.02, timeout=30)

        batch, results = anyio.run(run)

    for r, (_, _, _, payload) in zip(requests[:2], batch.requests[:2], strict=True):
        planned = plan(wire_of(model), model, r.context, r.options).request.payload
        assert payload == {k: v for k, v in planned.items() if k not in STREAMING}
    # The plans differ by what the options add: a line without them would show here.
    bare = plan(wire_of(model), model, tools, api.options("http://x.invalid", max_tokens=300))
    assert batch.requests[0][3] != {
        k: v for k, v in bare.request.payload.items() if k not in STREAMING
    }
    # A tool call in a result is read (the AI SDK's batch results were text only:
    # https://github.com/vercel/ai/pull/19900, "discards ... tool calls").
    forced_result = results[0].message
    assert results[0].outcome == "succeeded"
    assert forced_result.stop_reason == "tool_use"
    (call,) = [c for c in forced_result.content if isinstance(c, ToolCall)]
    assert (call.name, call.arguments) == ("get_weather", {"city": "Paris"})


def test_direct_anthropic_batches_without_bedrock_or_an_openai_file(tmp_path: Path) -> None:
    # LiteLLM batches reach Anthropic only through Bedrock; direct Anthropic batches are an
    # open request (https://github.com/BerriAI/litellm/issues/17265,
    # https://github.com/BerriAI/litellm/issues/9680 "Anthropic's format is a bit different").
    api = by_name("anthropic")
    with fake_vendor(scenarios={api.model_id: [faux_text("Hi.", usage=USAGE)]}) as server:
        requests = _requests(api, server, 1)

        async def run() -> list[BatchResult]:
            job = await submit(requests, store=tmp_path, name="direct")
            return await job.collect(interval=0.02, timeout=20)

        (result,) = anyio.run(run)
        assert server.batches.created == 1
        assert not server.batches.files  # Message Batches: the lines in the create call
    assert result.outcome == "succeeded" and result.message.text() == "Hi."
    assert result.batch_id.startswith("msgbatch_")
    assert result.message.provider == "anthropic"


def test_a_request_stream_refuses_is_refused_at_submission_not_a_day_later(
    tmp_path: Path,
) -> None:
    # A batch line the vendor cannot take comes back hours later as a confusing per-line
    # error ("output_format: Extra inputs are not permitted",
    # https://github.com/anthropics/anthropic-sdk-python/issues/1118). Here the same error
    # `stream()` raises, before anything is written or sent.
    api = by_name("anthropic")
    with fake_vendor(scenarios={"claude-sonnet-4-0": ["never"]}) as server:
        model = get_model("anthropic", "claude-sonnet-4-0")
        opts = api.options(server.url, output_schema=CITY, reasoning="low")
        context = _ask("Which city?")
        with pytest.raises(ValueError) as streamed:
            plan(wire_of(model), model, context, opts)
        with pytest.raises(ValueError) as batched:
            anyio.run(
                lambda: submit(
                    [BatchRequest("late", model, context, opts)], store=tmp_path, name="r"
                )
            )
        assert server.batches.created == 0
    assert "'late'" in str(batched.value)
    assert str(streamed.value) in str(batched.value)
    assert not (tmp_path / "r").exists()


# --- 2. results, matched and never lost ------------------------------------------------------


@pytest.mark.parametrize("api", LOCAL, ids=_ids(LOCAL))
def test_results_are_matched_by_custom_id_never_by_order(
    api: API, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Results come back in any order: match on custom_id
    # (https://platform.claude.com/docs/en/api/beta/messages/batches/results;
    # https://github.com/edubruell/tidyllm/issues/37); Gemini's came back out of order and
    # one key's answer under another (https://github.com/googleapis/python-genai/issues/1909),
    # and its inline responses lost the metadata that keyed them
    # (https://github.com/googleapis/python-genai/issues/1886). Here the vendor answers in
    # reverse, repeats a line and leaves one out: each id gets its own answer once, and the
    # missing one is an error row, not a lost row.
    _usable(api, monkeypatch)
    model = api.model()
    turns = [faux_text(f"answer {i}", usage=USAGE) for i in range(6)]
    with fake_vendor(scenarios={model.id: turns}, batch_delay=3600) as server:
        requests = _requests(api, server, 5)

        async def run() -> list[BatchResult]:
            job = await submit(
                requests, store=tmp_path, name="order", settings=api.settings(server.url)
            )
            batch = _only_batch(server)
            answers = _answers(server, batch)  # answer i for request i
            shuffled = list(reversed(answers))
            _end_with(server, batch, shuffled[:-1] + [shuffled[1]])  # q0 left out, q3 twice
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
    assert [r.custom_id for r in results] == [f"q{i}" for i in range(5)]
    assert [r.message.text() for r in results[1:]] == [f"answer {i}" for i in range(1, 5)]
    lost = results[0]
    assert lost.outcome == "errored" and lost.message.error is not None
    assert lost.message.error.kind == "protocol"
    assert lost.message.error.message  # the vendor gave no line for it, said in words
    rows = (tmp_path / "order" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["id"] for x in rows) == [f"q{i}" for i in range(5)]


def test_any_custom_id_the_caller_chooses_keys_its_result(tmp_path: Path) -> None:
    # A vendor's custom_id is at most 64 characters of [A-Za-z0-9_-]
    # (https://github.com/anthropics/anthropic-sdk-python/pull/1427); a tool that made its
    # own ids lost the caller's keys (https://github.com/edubruell/tidyllm/issues/37). The
    # caller's ids here are any strings; each result comes back under its own.
    api = by_name("anthropic")
    ids = ["row 1/é", "x" * 300, "ünïcødé ☃", "two\nlines", "1"]
    turns = [faux_text(f"for {i}", usage=USAGE) for i in range(len(ids))]
    with fake_vendor(scenarios={api.model_id: turns}, batch_delay=0.05) as server:
        opts = api.options(server.url, max_tokens=100)
        requests = [BatchRequest(c, api.model(), _ask(c), opts) for c in ids]

        async def run() -> list[BatchResult]:
            job = await submit(requests, store=tmp_path, name="ids")
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
        with pytest.raises(ValueError, match="used twice"):
            anyio.run(lambda: submit(requests + requests[:1], store=tmp_path, name="twice"))
    assert [(r.custom_id, r.message.text()) for r in results] == [
        (c, f"for {i}") for i, c in enumerate(ids)
    ]
    # The job a restart reopens is kept on disk (the AI SDK leaves persisting the batch
    # reference to the caller: https://github.com/vercel/ai/pull/18346); never its key.
    kept = [f for f in (tmp_path / "ids").rglob("*") if f.is_file()]
    assert kept and not [f.name for f in kept if KEY.encode() in f.read_bytes()]


@pytest.mark.parametrize("api", LOCAL, ids=_ids(LOCAL))
def test_an_errored_request_keeps_the_vendors_kind_and_words(
    api: API, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An Anthropic batch's per-item error type and message were read only into a log line
    # and dropped (https://github.com/crmne/ruby_llm/issues/928); an OpenAI batch whose every
    # line failed had only an error file, and the job got a generic message
    # (https://github.com/ProjectTech4DevAI/kaapi-backend/issues/723).
    _usable(api, monkeypatch)
    model = api.model()
    script = [faux_error("invalid_request", "max_tokens: 999999999 is too large")] * 2
    with fake_vendor(scenarios={model.id: script}, batch_delay=0.05) as server:
        requests = _requests(api, server, 2)

        async def run() -> list[BatchResult]:
            job = await submit(
                requests, store=tmp_path, name="errs", settings=api.settings(server.url)
            )
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
    for r in results:
        error = r.message.error
        assert r.outcome == "errored" and error is not None
        assert error.kind == "invalid_request"
        assert "max_tokens: 999999999 is too large" in error.message
        assert r.message.stop_reason == "error"


@pytest.mark.parametrize("api", LOCAL, ids=_ids(LOCAL))
def test_batch_cost_is_the_streams_at_the_batch_price_never_zero(
    api: API, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LiteLLM recorded every Anthropic batch at 0 tokens and $0
    # (https://github.com/BerriAI/litellm/issues/27944); a Gemini batch's camelCase usage
    # read as 0 tokens (https://github.com/sinas-platform/sinas/pull/129).
    _usable(api, monkeypatch)
    model = api.model()
    turns = [faux_text("Forty-two.", usage=USAGE)] * 2
    with fake_vendor(scenarios={model.id: turns}, batch_delay=0.05) as server:
        (request,) = _requests(api, server, 1)

        async def run() -> tuple[AssistantMessage, BatchResult]:
            streamed = await complete(request.model, request.context, request.options)
            job = await submit(
                [request], store=tmp_path, name="cost", settings=api.settings(server.url)
            )
            (result,) = await job.collect(interval=0.02, timeout=20)
            return streamed, result

        streamed, result = anyio.run(run)
    usage = result.message.usage
    assert (usage.input, usage.output) == (streamed.usage.input, streamed.usage.output) != (0, 0)
    assert usage.cost is not None and streamed.usage.cost is not None
    assert usage.cost.total > 0
    assert usage.cost.total == pytest.approx(streamed.usage.cost.total / 2)


def test_junk_lines_in_a_results_file_lose_no_row(tmp_path: Path) -> None:
    # One results record without a custom_id (a KeyError) aborted the whole retrieval,
    # discarding what was parsed (https://github.com/mozilla-ai/any-llm/pull/1346 review).
    api = by_name("openai-chat")
    if api.missing():
        pytest.skip(str(api.missing()))
    turns = [faux_text(f"answer {i}", usage=USAGE) for i in range(3)]
    with fake_vendor(scenarios={api.model_id: turns}, batch_delay=0.05) as server:
        requests = _requests(api, server, 3)

        async def run() -> list[BatchResult]:
            job = await submit(requests, store=tmp_path, name="junk")
            batch = _only_batch(server)
            while (await job.poll()).state != "ended":
                await anyio.sleep(0.02)
            stored = server.batches.file(batch.result_files["output"])
            assert stored is not None
            lines = stored.data.splitlines()
            whole = json.loads(lines[1])
            del whole["custom_id"]
            stored.data = b"\n".join(
                [b"not json", lines[0], json.dumps(whole).encode(), b"[1, 2]", lines[2], b'{"cut'],
            )
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
    assert [r.custom_id for r in results] == ["q0", "q1", "q2"]
    assert [r.outcome for r in results] == ["succeeded", "errored", "succeeded"]
    assert results[2].message.text() == "answer 2"
    assert results[1].message.error is not None and results[1].message.error.kind == "protocol"


def test_results_come_as_each_part_ends_not_when_the_whole_job_has(tmp_path: Path) -> None:
    # The AI SDK hands a batch's results only once the whole batch is complete
    # (https://github.com/vercel/ai/pull/18346 "returns a stream of results if the batch is
    # complete"); issue 37 asks for results as they become available. An eval over two
    # Gemini models is two vendor batches (one model each): the first to end is read while
    # the other runs, and counted as such.
    api = by_name("gemini")
    flash, pro = api.model(), get_model("google", "gemini-2.5-pro")
    scenarios = {
        m.id: [faux_text(f"{m.id} {i}", usage=USAGE) for i in range(2)] for m in (flash, pro)
    }
    with fake_vendor(scenarios=scenarios, batch_delay=3600) as server:
        opts = api.options(server.url, max_tokens=100)
        requests = [
            BatchRequest(f"{m.id}/{i}", m, _ask("hi"), opts) for m in (flash, pro) for i in range(2)
        ]

        async def run() -> tuple[Any, list[str], Any, list[str], list[str]]:
            job = await submit(requests, store=tmp_path, name="two")
            (first,) = [b for b in server.batches.batches.values() if b.requests[0][2] == flash.id]
            first.ends_at = 0.0
            early = await job.poll()
            now = [r.custom_id async for r in job.results()]
            midway = await job.poll()
            again = [r.custom_id async for r in job.results()]
            for b in server.batches.batches.values():
                b.ends_at = 0.0
            rest = [r.custom_id for r in await job.collect(interval=0.02, timeout=20)]
            return early, now, midway, again, rest

        early, now, midway, again, rest = anyio.run(run)
    assert (early.state, early.succeeded, early.pending) == ("running", 2, 2)
    assert now == [f"{flash.id}/0", f"{flash.id}/1"]
    assert (midway.collected, midway.pending) == (2, 2)
    assert again == []  # each result is handed over once
    assert rest == [r.custom_id for r in requests]


# --- 3. expiry, cancel, crashes --------------------------------------------------------------


@pytest.mark.parametrize("api", LOCAL, ids=_ids(LOCAL))
def test_an_expired_batch_keeps_what_ran_and_resubmits_only_the_rest_once(
    api: API, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An expired OpenAI batch still returns the lines it finished; a client that treated it
    # as failed threw paid answers away (https://github.com/warmbly/warmbly/pull/333;
    # https://help.openai.com/en/articles/9197833-batch-api-faq "any already completed work
    # is returned"); resubmit only the unfinished, keep the rest
    # (https://github.com/bespokelabsai/curator/issues/226,
    # https://github.com/Mohamedsaleh14/Reddit_Scrapper/issues/14). A script run again after
    # a crash asks for the resubmission again: it must not be billed twice (issue 37).
    _usable(api, monkeypatch)
    model = api.model()
    turns = [faux_text(f"answer {i}", usage=USAGE) for i in range(8)]
    with fake_vendor(scenarios={model.id: turns}, batch_delay=0.3, batch_expiry=0.05) as server:
        server.batches.expire_after = 2
        requests = _requests(api, server, 4)
        settings = api.settings(server.url)

        async def run() -> tuple[list[BatchResult], list[int], Any, list[BatchResult], Any]:
            job = await submit(requests, store=tmp_path, name="exp", settings=settings)
            first = await job.collect(interval=0.02, timeout=20)
            server.batches.expiry = None
            server.batches.delay = 3600
            asked = [await job.resubmit_expired()]
            # The process dies here; the rerun script submits and resubmits again.
            again = await submit(requests, store=tmp_path, name="exp", settings=settings)
            asked.append(await again.resubmit_expired())
            midway = await again.poll()
            server.batches.delay = 0.0
            for batch in server.batches.batches.values():
                batch.ends_at = 0.0
            second = await again.collect(interval=0.02, timeout=20)
            asked.append(await again.resubmit_expired())
            return first, asked, midway, second, await again.poll()

        first, asked, midway, second, done = anyio.run(run)
        assert server.batches.created == 2
    assert _outcomes(first) == {
        "q0": "succeeded",
        "q1": "succeeded",
        "q2": "expired",
        "q3": "expired",
    }
    assert first[2].message.error is not None and first[2].message.error.kind == "expired"
    assert asked == [2, 0, 0]
    assert (midway.succeeded, midway.expired, midway.pending) == (2, 0, 2)
    assert [r.message.text() for r in second] == [f"answer {i}" for i in range(4)]
    assert {r.batch_id for r in second[:2]} != {r.batch_id for r in second[2:]}
    assert (done.state, done.total, done.succeeded, done.pending) == ("collected", 4, 4, 0)
    (entry,) = list_jobs(tmp_path)
    assert entry[1].succeeded == 4


@pytest.mark.parametrize("api", LOCAL, ids=_ids(LOCAL))
def test_a_cancelled_batch_keeps_the_answers_that_ran_before_the_cancel(
    api: API, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gateway reported every line of a cancelled batch as canceled, answers already made
    # (and billed) included (https://github.com/stdapi-ai/stdapi.ai/issues/60); LiteLLM did
    # not bill cancelled batches that produced output
    # (https://github.com/BerriAI/litellm/pull/37205). Read by another process, which only
    # has the job's directory (AI SDK: "the batch reference needs to persist across process
    # restarts", https://github.com/vercel/ai/pull/18346).
    _usable(api, monkeypatch)
    model = api.model()
    turns = [faux_text('{"city": "Paris"}', usage=USAGE)] * 4
    with fake_vendor(scenarios={model.id: turns}, batch_delay=3600) as server:
        server.batches.cancel_delay = 3600
        requests = _requests(api, server, 4, output_schema=CITY)
        settings = api.settings(server.url)

        async def run() -> list[BatchResult]:
            job = await submit(requests, store=tmp_path, name="stop", settings=settings)
            batch = _only_batch(server)
            await job.cancel()
            ran = _answers(server, batch)[:2]
            _end_with(
                server, batch, ran + [FakeResult(c, "cancelled") for c, *_ in batch.requests[2:]]
            )
            other = open_job(
                tmp_path, "stop", settings=settings, options=StreamOptions(api_key="k")
            )
            return await other.collect(interval=0.02, timeout=20)

        results = anyio.run(run)
    assert [r.outcome for r in results] == ["succeeded", "succeeded", "cancelled", "cancelled"]
    for r in results[:2]:
        assert r.message.output == {"city": "Paris"}
        assert r.message.usage.cost is not None and r.message.usage.cost.total > 0
    error = results[2].message.error
    assert error is not None and error.kind == "aborted"


@pytest.mark.parametrize("name", ["anthropic", "openai-chat"])
def test_a_create_whose_answer_a_kill_lost_is_found_not_billed_twice(
    name: str, tmp_path: Path
) -> None:
    # The operator's kill -9 (issue 37): a batch the vendor accepted, whose id the process
    # never read, is billed and never collected (orphaned jobs that keep costing money:
    # https://github.com/microsoft/CromwellOnAzure/issues/267). `recover` finds it.
    api = by_name(name)
    if api.missing():
        pytest.skip(str(api.missing()))
    path = {"anthropic": r"/v1/messages/batches", "openai-chat": r"/v1/batches"}[name]
    turns = [faux_text(f"answer {i}", usage=USAGE) for i in range(3)]
    with fake_vendor(scenarios={api.model_id: turns}, batch_delay=0.05) as server:
        requests = _requests(api, server, 3)
        hold = server.batches.holds.add("POST", path, when="after")

        async def killed() -> None:
            async with anyio.create_task_group() as tg:

                async def kill() -> None:
                    await anyio.to_thread.run_sync(hold.wait)
                    tg.cancel_scope.cancel()

                tg.start_soon(kill)
                await submit(requests, store=tmp_path, name="orphan")

        anyio.run(killed)
        hold.release()

        async def restart() -> list[BatchResult]:
            (job,) = await recover(tmp_path, options=StreamOptions(api_key="k"))
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(restart)
        assert server.batches.created == 1
    assert [r.message.text() for r in results] == ["answer 0", "answer 1", "answer 2"]
    assert list_jobs(tmp_path)[0][1].state == "collected"


# --- 4. vendor rules, budgets, retirements ---------------------------------------------------


def test_a_bedrock_batch_under_its_minimum_is_refused_before_any_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bedrock batch inference takes a minimum number of records per job; users learn it
    # from a failed job (https://github.com/langchain-ai/langchain-aws/issues/250 ">= 1000
    # examples"; https://github.com/BoundaryML/baml/pull/3036 "Minimum number of records
    # per batch inference job").
    api = by_name("bedrock")
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    requests = [
        BatchRequest(f"q{i}", api.model(), _ask("hi"), StreamOptions(max_tokens=10))
        for i in range(3)
    ]
    settings = BatchSettings(bucket="b", role_arn="arn:aws:iam::123456789012:role/r")
    with pytest.raises(ValueError, match=f"at least {api.min_requests()} requests"):
        anyio.run(lambda: submit(requests, store=tmp_path, name="small", settings=settings))
    assert list(tmp_path.iterdir()) == []


def _spend_cap_run(
    tmp_path: Path, **limits: Any
) -> tuple[BatchHTTPError, bool, list[BatchResult], float]:
    """Under a spend cap of $0.01 (`limits`: how it is configured; `budget` in the options
    when it is a named one): a batch whose worst case breaks it, then one that fits."""
    api = by_name("anthropic")
    named = "eval" if limits.get("budgets") else None
    turns = [faux_text("ok", usage=USAGE)] * 4
    with fake_vendor(scenarios={api.model_id: turns}, batch_delay=0.05) as server:
        configure_limits(**limits)

        def reqs(max_tokens: int) -> list[BatchRequest]:
            opts = api.options(server.url, max_tokens=max_tokens, budget=named)
            return [BatchRequest(f"q{i}", api.model(), _ask("hi"), opts) for i in range(4)]

        with pytest.raises(BatchHTTPError) as refused:
            anyio.run(lambda: submit(reqs(4000), store=tmp_path, name="big"))
        nothing = server.batches.created == 0 and not (tmp_path / "big").exists()

        async def fits() -> tuple[list[BatchResult], float]:
            job = await submit(reqs(200), store=tmp_path, name="fits")
            results = await job.collect(interval=0.02, timeout=20)
            (budget,) = (await inspect_limits()).budgets
            assert budget.reservations == []
            return results, budget.spent

        results, spent = anyio.run(fits)
    return refused.value, nothing, results, spent


def test_a_batch_holds_its_worst_case_against_the_spend_cap(tmp_path: Path) -> None:
    # The operator's four workers shared one spend cap: LiteLLM went 20% over it and
    # pydantic-ai 29% (issue 37). A batch reserves its worst case at submission: one that
    # could break the cap is refused before anything reaches the vendor, one that fits is
    # settled to its exact cost once collected.
    refused, nothing, results, spent = _spend_cap_run(tmp_path, budgets={"eval": 0.01})
    assert refused.kind == "budget" and "nothing was submitted" in refused.message
    assert nothing
    assert [r.outcome for r in results] == ["succeeded"] * 4
    exact = sum(r.message.usage.cost.total for r in results if r.message.usage.cost)
    assert exact > 0 and spent == pytest.approx(exact)


def test_a_process_wide_spend_cap_holds_for_a_batch_too(tmp_path: Path) -> None:
    # As above (issue 37's one spend cap shared by every call), with the cap every call
    # of the process draws on: `configure_limits(budget_usd=...)`.
    refused, nothing, results, spent = _spend_cap_run(tmp_path, budget_usd=0.01)
    assert refused.kind == "budget" and nothing
    assert [r.outcome for r in results] == ["succeeded"] * 4
    exact = sum(r.message.usage.cost.total for r in results if r.message.usage.cost)
    assert exact > 0 and spent == pytest.approx(exact)


def test_a_full_batch_queue_is_learned_not_hammered(tmp_path: Path) -> None:
    # Batch queues are limited by what is enqueued (https://aipromptgear.com/models-and-apis/
    # openai-batch-api-limits-expiration-and-output-files/ "Batch queue limits are based on
    # enqueued input tokens"): a refusal is learned, the next submission waits or says so
    # without asking the vendor again.
    api = by_name("anthropic")
    with fake_vendor(scenarios={api.model_id: ["x"] * 9}, batch_delay=3600) as server:
        server.batches.queue_limit = 4
        calls: list[str] = []
        real = server.batches.create

        def counted(*args: Any, **kwargs: Any) -> FakeBatch:
            calls.append("create")
            return real(*args, **kwargs)

        server.batches.create = counted  # type: ignore[method-assign]

        async def run() -> list[BatchHTTPError]:
            await submit(_requests(api, server, 3), store=tmp_path, name="a")
            refused = []
            for name in ("b", "c"):
                reqs = [
                    BatchRequest(f"{name}{i}", r.model, r.context, r.options)
                    for i, r in enumerate(_requests(api, server, 3))
                ]
                with pytest.raises(BatchHTTPError) as caught:
                    await submit(reqs, store=tmp_path, name=name)
                refused.append(caught.value)
            return refused

        said, learned = anyio.run(run)
    assert said.kind == learned.kind == "rate_limit"
    assert "queue full" in said.message and "learned from a refusal" in learned.message
    assert learned.retry_after is not None and learned.retry_after > 0
    assert calls == ["create"]  # b's was refused before a batch was made; c never asked


def test_a_retired_model_warns_when_batched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # pydantic-ai warned that claude-sonnet-4-5 retired on 2026-11-30; stream-core said
    # nothing (issue 37). A batch runs for hours: the warning comes at submission.
    from stream_core import _retirements

    monkeypatch.setattr(_retirements, "clock", lambda: datetime.date(2026, 12, 1))
    monkeypatch.setattr(_retirements, "_warned", set())
    api = by_name("anthropic")
    model = get_model("anthropic", "claude-sonnet-4-5")
    with fake_vendor(scenarios={model.id: [faux_text("late")]}, batch_delay=0.05) as server:
        request = BatchRequest("r", model, _ask("hi"), api.options(server.url, max_tokens=20))
        with caplog.at_level(logging.WARNING, logger="stream_core"):
            anyio.run(lambda: submit([request], store=tmp_path, name="old"))
    (said,) = [r.getMessage() for r in caplog.records if "retired" in r.getMessage()]
    assert "claude-sonnet-4-5" in said and "2026-11-30" in said and "claude-sonnet-5-5" in said
