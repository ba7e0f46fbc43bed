"""A batch OpenAI's queue refuses after it accepted the create.

OpenAI validates a batch after `POST /v1/batches` answers: a batch that would take the
organization over its enqueued-token limit goes from `validating` to `failed` with
`token_limit_exceeded` a few seconds later. None of its requests ran and nothing was
billed. The job journals the refusal, learns the pause for every process, and submits
the part again when the queue has room: `collect` returns every answer, once, at one
held-and-settled cost. (A refusal seen at the create's own check is a `rate_limit` from
`submit`: tests/batch/test_openai_batch.py.)
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import anyio
import pytest

import stream_core
from stream_core import (
    Context,
    StreamOptions,
    Usage,
    UserMessage,
    configure_limits,
    inspect_limits,
)
from stream_core.batch import BatchRequest, BatchResult, submit
from stream_core.provider import BatchSettings
from stream_core.testing import fake_vendor, faux_text

MODEL = stream_core.get_model("openai", "gpt-4o-mini", api="openai-completions")


def _requests(url: str, prefix: str, budget: str | None = None) -> list[BatchRequest]:
    options = StreamOptions(base_url=url + "/v1", api_key="sk-test", budget=budget)
    ask = Context(messages=[UserMessage(content="Weather in Paris?")])
    return [BatchRequest(f"{prefix}{i}", MODEL, ask, options) for i in range(2)]


def test_a_part_the_queue_refuses_late_is_sent_again_and_collected_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    turns = [faux_text("It is 21 degrees.", usage=Usage(input=120, output=30))] * 8
    settings = BatchSettings(queue_pause=0.2)
    with fake_vendor(scenarios={MODEL.id: turns}, batch_delay=0.6) as fake:
        fake.batches.queue_limit = 2  # one job's two requests fill the queue
        fake.batches.validation = 0.2  # the verdict shows after the create's own check
        configure_limits(budgets={"eval": 5.0})

        async def run() -> tuple[list[BatchResult], list[BatchResult], float, int]:
            first = await submit(_requests(fake.url, "a", "eval"), store=tmp_path, name="first")
            second = await submit(
                _requests(fake.url, "b", "eval"), store=tmp_path, name="second", settings=settings
            )
            got = await second.collect(interval=0.05, timeout=30)
            earlier = await first.collect(interval=0.05, timeout=30)
            (budget,) = (await inspect_limits()).budgets
            assert budget.reservations == []  # every hold settled
            return got, earlier, budget.spent, len(second.state.parts[0].refused)

        with caplog.at_level(logging.WARNING, logger="stream_core"):
            got, earlier, spent, refusals = anyio.run(run)
        billed = fake.batches.created
    configure_limits()

    assert refusals >= 1
    assert "refused by openai-batch's batch queue" in caplog.text
    assert [(r.custom_id, r.outcome) for r in got] == [("b0", "succeeded"), ("b1", "succeeded")]
    assert all(r.message.content and r.message.error is None for r in got + earlier)
    assert billed == 2  # the refused batches were never billed: two ran, one per job
    exact = sum(r.message.usage.cost.total for r in got + earlier if r.message.usage.cost)
    assert exact > 0 and spent == pytest.approx(exact)
    text = (tmp_path / "second" / "journal.jsonl").read_text()
    journal = [json.loads(x) for x in text.splitlines() if x.strip()]
    events = [r["event"] for r in journal if r.get("part") == 0]
    assert events.count("refused") == refusals
    assert events.count("submitted") == refusals + 1
    assert events[-1] in ("collected", "settled", "cleaned")


def test_results_without_waiting_say_the_queue_after_the_other_parts(tmp_path: Path) -> None:
    """`results()` does not wait: a refused part not yet taken again is its `rate_limit`
    error, raised once the parts that ended are yielded; `poll()` says "submitting"."""
    turns = [faux_text("ok")] * 8
    settings = BatchSettings(queue_pause=60.0)
    with fake_vendor(scenarios={MODEL.id: turns}, batch_delay=5.0) as fake:
        fake.batches.queue_limit = 2
        fake.batches.validation = 0.1
        configure_limits()

        async def run() -> tuple[stream_core.provider.BatchHTTPError, list[str], int]:
            await submit(_requests(fake.url, "a"), store=tmp_path, name="first")
            job = await submit(
                _requests(fake.url, "b"), store=tmp_path, name="second", settings=settings
            )
            await anyio.sleep(0.2)  # the verdict is out
            seen: list[str] = []
            with pytest.raises(stream_core.provider.BatchHTTPError) as said:
                async for r in job.results():
                    seen.append(r.custom_id)
            progress = await job.poll()  # a progress display neither raises nor waits
            assert progress.state == "submitting", progress
            return said.value, seen, len(job.state.parts[0].refused)

        error, seen, refusals = anyio.run(run)
        created = len(fake.batches.batches)
    configure_limits()
    assert error.kind == "rate_limit" and "queue" in error.message
    assert seen == [] and refusals == 1
    assert created == 2  # not asked again inside the learned pause


def test_a_bad_queue_setting_is_named() -> None:
    for name in ("queue_pause", "queue_wait"):
        for bad in (-1.0, float("nan"), float("inf"), "60", True):
            with pytest.raises(ValueError, match=name):
                BatchSettings(**{name: bad})  # type: ignore[arg-type]


def test_a_part_refused_past_its_window_is_expired_and_can_be_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never an endless loop of creates: a part the queue still refuses once the vendor's
    window since its submission is over comes back `expired` (none of it ran), and
    `resubmit_expired()` sends it again."""
    from stream_core.providers import _openai_batch

    turns = [faux_text("ok", usage=Usage(input=12, output=3))] * 8
    with fake_vendor(scenarios={MODEL.id: turns}, batch_delay=0.3) as fake:
        fake.batches.queue_limit = 2
        fake.batches.validation = 0.1
        configure_limits()

        async def run() -> tuple[list[BatchResult], list[BatchResult], int]:
            await submit(_requests(fake.url, "a"), store=tmp_path, name="first")
            job = await submit(_requests(fake.url, "b"), store=tmp_path, name="second")
            # A window already over (the vendor's is 24 h): the refusal is final.
            short = dataclasses.replace(_openai_batch.BATCH, window_hours=0.0)
            with monkeypatch.context() as m:
                m.setattr(_openai_batch, "BATCH", short)
                gone = await job.collect(interval=0.05, timeout=30)
            sent = await job.resubmit_expired()
            return gone, await job.collect(interval=0.05, timeout=30), sent

        gone, again, sent = anyio.run(run)
    configure_limits()
    assert [(r.custom_id, r.outcome) for r in gone] == [("b0", "expired"), ("b1", "expired")]
    assert all(r.message.error and r.message.error.kind == "expired" for r in gone)
    assert "queue refused" in str(gone[0].message.error)
    assert sent == 2
    assert [(r.custom_id, r.outcome) for r in again] == [("b0", "succeeded"), ("b1", "succeeded")]
