"""Run-level pains of an eval fleet (issue 37), each a test from the user's side: what the
operator hand-wrote in LiteLLM, pydantic-ai and the AI SDK (resume after `kill -9` keyed by
prompt, a progress line, a cost summary, fallback answers kept apart from the primary's,
a look at the limiter) done with `stream_core.runs`, routes and the limiter against the
fake vendor. Each test cites where the pain was reported."""

from __future__ import annotations

import datetime
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from stream_core import (
    AssistantMessage,
    Context,
    Route,
    StreamError,
    StreamOptions,
    TextContent,
    Usage,
    UserMessage,
    clear_limits,
    complete,
    configure_limits,
    get_model,
    inspect_limits,
)
from stream_core.batch import BatchRequest, submit
from stream_core.runs import Progress, ResultLog, cost_summary
from stream_core.testing import fake_vendor, faux_error, faux_text
from stream_core.testing._serve_quota import Quota

USAGE = Usage(input=100, output=10)
PRIMARY = get_model("openai", "gpt-4.1-mini")
FALLBACK = get_model("openai", "gpt-4.1")
GUARD = 20.0  # seconds: a guard against hangs, never a timing assertion


def _ask(text: str) -> Context:
    return Context(messages=[UserMessage(content=text)])


# --- resume keyed by the caller's id ---------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys, time
    import anyio
    from stream_core import Context, StreamOptions, UserMessage, complete, get_model
    from stream_core.runs import ResultLog

    url, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model = get_model("openai", "gpt-4.1-mini")
    opts = StreamOptions(api_key="sk-test", base_url=url + "/v1", max_retries=0)

    async def main() -> None:
        log = ResultLog(path)
        for q in log.pending(f"prompt-{i}" for i in range(n)):
            ctx = Context(messages=[UserMessage(content=f"{q}?")])
            log.write(q, await complete(model, ctx, opts))
            print(q, flush=True)
            time.sleep(0.02)

    anyio.run(main)
    print("done", flush=True)
    """
)


def _asked(server: Any) -> list[str]:
    """The prompt ids the vendor was asked, in order."""
    found: list[str] = []
    for r in server.requests:
        if not r.path.endswith("/chat/completions"):
            continue
        text = json.dumps(r.body.get("messages"))
        found.extend(q for q in (f"prompt-{i}" for i in range(100)) if f"{q}?" in text)
    return found


def test_a_kill_9_mid_run_resumes_without_paying_twice(tmp_path: Path) -> None:
    # The operator's eval: 2,000 prompts on four workers; each peer made them write resume
    # after `kill -9` keyed by prompt by hand (issue 37); eval tools grew the same flag
    # (https://github.com/ai-twinkle/Eval/issues/112 "Read existing JSONL results and skip
    # questions that already have results"; https://github.com/bjgreenberg/senior-engineering-partner/pull/142
    # "a re-invocation re-executed all 60 — wasting spend on completed work").
    n = 12
    turns = [faux_text(f"answer {i}", usage=USAGE) for i in range(2 * n)]
    path = tmp_path / "results.jsonl"
    with fake_vendor(scenarios={PRIMARY.id: turns}) as server:
        cmd = [sys.executable, "-c", WORKER, server.url, str(path), str(n)]
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert first.stdout is not None
        for _ in range(5):
            assert first.stdout.readline().startswith("prompt-")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=GUARD)
        first.stdout.close()
        before = {r.id for r in ResultLog.read(path)}
        asked_before = _asked(server)
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=GUARD * 3)
        assert again.stdout.rstrip().endswith("done"), again.stderr
        asked = _asked(server)
    rows = list(ResultLog.read(path))
    assert sorted(str(r.id) for r in rows) == sorted(f"prompt-{i}" for i in range(n))
    assert len(rows) == n  # each prompt recorded once
    assert len(before) >= 5
    # The rerun asked only what was not recorded: a prompt done before the kill is never
    # paid for again; only one in flight at the kill may be asked twice.
    rerun = asked[len(asked_before) :]
    assert not before & set(rerun)
    assert len(asked) - n <= 1 and len(set(asked)) == n
    assert all(r.outcome == "ok" and r.usd for r in rows)


def test_a_batch_eval_resumed_from_its_result_log_is_not_submitted_again(
    tmp_path: Path,
) -> None:
    # The same operator on batches (issue 37): a rerun after a crash asks only for what its
    # JSONL has not recorded (https://github.com/OpenDCAI/DataFlow/issues/149 "continue
    # pipeline from last generated JSONL"). Those requests are already in the job the crash
    # left: the rerun resumes that job instead of paying for them in a new one.
    model = get_model("anthropic", "claude-haiku-4-5")
    path, jobs = tmp_path / "results.jsonl", tmp_path / "jobs"
    turns = [faux_text(f"answer {i}", usage=USAGE) for i in range(4)]
    with fake_vendor(scenarios={model.id: turns}, batch_delay=0.05) as s:
        opts = StreamOptions(api_key="k", base_url=s.url, max_tokens=50)
        ids = [f"p{i}" for i in range(4)]
        requests = {q: BatchRequest(q, model, _ask(q), opts) for q in ids}

        async def script(crash_after: int | None) -> None:
            log = ResultLog(path)
            todo = [requests[str(q)] for q in log.pending(ids)]
            job = await submit(todo, store=jobs, name="eval")
            with log:
                for n, r in enumerate(await job.collect(interval=0.02, timeout=GUARD)):
                    if n == crash_after:
                        raise KeyboardInterrupt  # the kill, after two rows were written
                    if r.custom_id in log.pending([r.custom_id]):
                        log.write(r.custom_id, r.message, batch_id=r.batch_id)

        with pytest.raises(KeyboardInterrupt):
            anyio.run(script, 2)
        anyio.run(script, None)
        assert s.batches.created == 1
    rows = list(ResultLog.read(path))
    assert [r.id for r in rows] == ids
    assert [r.message.text() for r in rows] == [f"answer {i}" for i in range(4)]
    assert all(r.batch for r in rows)


def _message(text: str, kind: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        api="openai-completions", provider="openai", model="gpt-4.1-mini",
        content=[TextContent(text=text)] if kind is None else [], usage=USAGE,
        stop_reason="stop" if kind is None else "error",
        error=None if kind is None else StreamError(kind=kind, message="429"),  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_resume_retries_the_failures_and_keeps_the_answers(tmp_path: Path) -> None:
    # "reuse non-error checkpointed results; only errored/malformed/missing scenarios re-run"
    # (https://github.com/bjgreenberg/senior-engineering-partner/pull/142); an answer a retry
    # would not change (a refusal) may count as done.
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("a", _message("yes"))
        log.write("b", _message("", "rate_limit"))
        log.write("c", _message("", "refusal"))
        log.write(3, _message("three"))
    again = ResultLog(path)
    assert again.pending(["a", "b", "c", 3, "d"]) == ["b", "c", "d"]
    assert again.failed == {"b": "rate_limit", "c": "refusal"}
    kept = ResultLog(path, done_kinds={"refusal"})
    assert kept.pending(["a", "b", "c", 3, "d"]) == ["b", "d"]
    with again:
        again.write("b", _message("now yes"))
    assert ResultLog(path).pending(["a", "b", "c"]) == ["c"]


# --- routes: the primary waited for, fallbacks counted apart -----------------------------------


def test_a_fallback_answer_is_counted_and_priced_as_the_fallbacks(tmp_path: Path) -> None:
    # When LiteLLM's router falls back, the response and its spend still name the requested
    # model ("if the fallback lands on a more expensive model, the spend is logged against
    # the wrong model": https://github.com/BerriAI/litellm/issues/25503); usage-based
    # routing counted a fallback's tokens for the primary
    # (https://github.com/BerriAI/litellm/issues/1518, PR #1555).
    scenarios = {
        PRIMARY.id: [faux_error("server", status=500)],
        FALLBACK.id: [faux_text("from the fallback", usage=USAGE)],
    }
    with fake_vendor(scenarios=scenarios) as server:
        base = server.url + "/v1"
        route = Route(
            [PRIMARY.replace(base_url=base), FALLBACK.replace(base_url=base)],
            wait_for_primary=True,
        )
        message = anyio.run(
            lambda: complete(route, _ask("hi"), StreamOptions(api_key="k", max_retries=0))
        )
    assert message.error is None and message.text() == "from the fallback"
    assert message.model == FALLBACK.id
    assert message.attempts is not None
    assert [(a.model, a.kind) for a in message.attempts] == [
        (PRIMARY.id, "server"),
        (FALLBACK.id, None),
    ]
    assert list(route.served_counts().values()) == [0, 1]
    assert route.fallback_calls == 1
    with ResultLog(tmp_path / "r.jsonl") as log:
        log.write("q1", message)
    (row,) = cost_summary(ResultLog.read(tmp_path / "r.jsonl")).rows
    assert (row.provider, row.model, row.count) == ("openai", FALLBACK.id, 1)
    assert message.usage.cost is not None and row.usd == pytest.approx(message.usage.cost.total)


def test_an_eval_waits_for_its_primary_at_its_quota_offline() -> None:
    # "an eval wants the primary, and falls over only on a real failure" (issue 37): a
    # saturated primary is waited for, never passed over; the fake vendor's windowed quota
    # answers with OpenAI's real rate-limit headers, so the harness tests this offline.
    quota = {PRIMARY.id: Quota(requests=2, window=0.5)}
    scenarios = {
        PRIMARY.id: [faux_text(f"primary {i}", usage=USAGE) for i in range(4)],
        FALLBACK.id: [faux_text("fallback", usage=USAGE)] * 4,
    }
    with fake_vendor(scenarios=scenarios, quota=quota) as server:
        base = server.url + "/v1"
        route = Route(
            [PRIMARY.replace(base_url=base), FALLBACK.replace(base_url=base)],
            wait_for_primary=True,
        )
        opts = StreamOptions(api_key="k", max_retry_delay=2.0)

        async def run() -> list[AssistantMessage]:
            with anyio.fail_after(GUARD):
                return [await complete(route, _ask(f"q{i}"), opts) for i in range(3)]

        messages = anyio.run(run)
        fallback_asked = [r for r in server.requests if r.model == FALLBACK.id]
    assert [m.text() for m in messages] == ["primary 0", "primary 1", "primary 2"]
    assert messages[0].limits is not None and messages[0].limits[0].limit == 2
    assert list(route.served_counts().values()) == [3, 0]
    assert fallback_asked == []


# --- a look at the limiter, progress and cost ------------------------------------------------


def test_what_the_limiter_holds_is_shown_and_cleared_without_reading_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "a way to see and clear what the limiter holds ... without reading Redis keys by
    # hand" (issue 37).
    from stream_core._cli import main

    store = str(tmp_path / "limits.json")
    with fake_vendor(scenarios={PRIMARY.id: ["a", "b"]}, quota=Quota(requests=2, window=60.0)) as s:
        configure_limits(store=store)
        opts = StreamOptions(api_key="sk-secret-key-1234", base_url=s.url + "/v1", max_retries=0)

        async def run() -> tuple[AssistantMessage, Any, Any]:
            for _ in range(2):
                await complete(PRIMARY, _ask("hi"), opts)
            held = await inspect_limits()
            await clear_limits(PRIMARY)
            cleared = await inspect_limits()
            return await complete(PRIMARY, _ask("hi"), opts), held, cleared

        refused, held, cleared = anyio.run(run)
        main(["limits", "show", "--store", store])
    (key,) = held.keys
    assert key.model == PRIMARY.id and key.limits["requests"].remaining == 0
    assert cleared.keys == []
    # Cleared, the call is sent and the vendor's own 429 answers it.
    assert refused.error is not None and refused.error.kind == "rate_limit"
    shown = capsys.readouterr().out
    assert "sk-secret-key-1234" not in shown and PRIMARY.id in shown


def test_a_progress_line_across_workers_counts_streams_and_batches(tmp_path: Path) -> None:
    # The operator hand-wrote "a progress line" for four workers sharing a store (issue 37).
    # Batch results (an expired one among them) count beside streamed answers.
    configure_limits(store=str(tmp_path / "store.json"))
    api_model = get_model("anthropic", "claude-haiku-4-5")
    script = [faux_text("ok", usage=USAGE)] * 4
    with fake_vendor(scenarios={api_model.id: script}, batch_delay=0.3, batch_expiry=0.05) as s:
        s.batches.expire_after = 2
        opts = StreamOptions(api_key="k", base_url=s.url, max_tokens=50)
        reqs = [BatchRequest(f"b{i}", api_model, _ask("hi"), opts) for i in range(3)]

        async def run() -> str:
            batch_worker, stream_worker = Progress("eval", total=5), Progress("eval", total=5)
            job = await submit(reqs, store=tmp_path / "jobs", name="eval")
            for r in await job.collect(interval=0.02, timeout=GUARD):
                await batch_worker.add(r)
            for text in ("one", "two"):
                await stream_worker.add(_message(text))
            view = await Progress("eval", total=5).read()
            assert view.failed_kinds == {"expired": 1}
            return batch_worker.line(view)

        line = anyio.run(run)
    assert line.startswith("5/5 done · 1 failed · $")


def test_a_cost_summary_by_model_with_the_batch_share(tmp_path: Path) -> None:
    # The operator's cost summary by model and provider (issue 37); LiteLLM recomputed a
    # batch's cost row by row from its output file
    # (https://github.com/BerriAI/litellm/issues/14884).
    model = get_model("anthropic", "claude-haiku-4-5")
    path = tmp_path / "results.jsonl"
    with fake_vendor(scenarios={model.id: [faux_text("ok", usage=USAGE)] * 4}) as s:
        opts = StreamOptions(api_key="k", base_url=s.url, max_tokens=50)

        async def run() -> None:
            job = await submit(
                [BatchRequest(f"b{i}", model, _ask("hi"), opts) for i in range(2)],
                store=tmp_path / "jobs",
                name="c",
            )
            with ResultLog(path) as log:
                for r in await job.collect(interval=0.02, timeout=GUARD):
                    log.write(r.custom_id, r.message, batch_id=r.batch_id)
                for i in range(2):
                    log.write(f"s{i}", await complete(model, _ask("hi"), opts))

        anyio.run(run)
    summary = cost_summary(ResultLog.read(path))
    (row,) = summary.rows
    assert (row.provider, row.model, row.count, row.batch) == ("anthropic", model.id, 4, 2)
    rows = list(ResultLog.read(path))
    streamed = [r.usd or 0.0 for r in rows if not r.batch]
    batched = [r.usd or 0.0 for r in rows if r.batch]
    assert all(streamed) and all(batched)
    assert all(b == pytest.approx(s / 2) for b, s in zip(batched, streamed, strict=True))
    assert row.usd == pytest.approx(sum(streamed + batched))
    assert "anthropic" in summary.table() and "50%" in summary.table()


def test_a_retired_model_warns_once_and_is_still_sent(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # pydantic-ai warned that claude-sonnet-4-5 retired on 2026-11-30; `stream-core
    # models` listed it without a note (issue 37).
    from stream_core import _retirements

    monkeypatch.setattr(_retirements, "clock", lambda: datetime.date(2026, 12, 1))
    monkeypatch.setattr(_retirements, "_warned", set())
    model = get_model("anthropic", "claude-sonnet-4-5")
    with fake_vendor(scenarios={model.id: ["still here", "again"]}) as s:
        opts = StreamOptions(api_key="k", base_url=s.url, max_tokens=20)

        async def run() -> list[str]:
            return [(await complete(model, _ask("hi"), opts)).text() for _ in range(2)]

        with caplog.at_level(logging.WARNING, logger="stream_core"):
            texts = anyio.run(run)
    said = [r.getMessage() for r in caplog.records if "retired" in r.getMessage()]
    assert texts == ["still here", "again"]
    assert len(said) == 1 and "2026-11-30" in said[0] and "claude-sonnet-5-5" in said[0]
