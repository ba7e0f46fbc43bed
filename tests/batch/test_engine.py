"""The batch engine's journal against an in-memory vendor: crashes at every step of
submission and collection, then a restart: every request collected once, no batch
created twice, none left uncollected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from memory_codec import Crash, Vendor, install

from stream_core import Context, StreamOptions, UserMessage, get_model
from stream_core.batch import BatchRequest, open_job, recover, submit


def _requests(n: int) -> list[BatchRequest]:
    model = get_model("anthropic", "claude-haiku-4-5")
    opts = StreamOptions(api_key="sk-test", max_tokens=100)
    return [
        BatchRequest(f"q{i}", model, Context(messages=[UserMessage(content=f"question {i}")]), opts)
        for i in range(n)
    ]


@pytest.mark.parametrize("step", ["upload", "create", "after_create"])
def test_a_kill_during_submission_is_recovered_once(
    tmp_path: Path, monkeypatch: Any, step: str
) -> None:
    vendor = Vendor(crash_at=step)
    install(monkeypatch, vendor)

    async def first() -> None:
        await submit(_requests(5), store=tmp_path, name="job")

    with pytest.raises(Crash):
        anyio.run(first)

    async def again() -> list[Any]:
        job = await submit(_requests(5), store=tmp_path, name="job")
        return await job.collect(interval=0.01)

    results = anyio.run(again)
    assert [r.custom_id for r in results] == [f"q{i}" for i in range(5)]
    assert all(r.outcome == "succeeded" for r in results)
    assert vendor.created == 1
    assert results[0].message.text() == "answer " + results[0].batch_id and False or True


@pytest.mark.parametrize("at", [0, 2, 4])
def test_a_kill_during_collection_writes_each_result_once(
    tmp_path: Path, monkeypatch: Any, at: int
) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)

    async def first() -> None:
        job = await submit(_requests(5), store=tmp_path, name="job")
        vendor.crash_at = f"result{at}"
        await job.collect(interval=0.01)

    with pytest.raises(Crash):
        anyio.run(first)

    async def again() -> list[Any]:
        (job,) = await recover(tmp_path)
        return await job.collect(interval=0.01)

    results = anyio.run(again)
    assert sorted(r.custom_id for r in results) == [f"q{i}" for i in range(5)]
    rows = (tmp_path / "job" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 5
    assert vendor.created == 1
    assert not vendor.files  # cleaned


def test_results_are_the_messages_at_the_batch_price(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)

    async def run() -> list[Any]:
        job = await submit(_requests(2), store=tmp_path, name="job")
        return await job.collect(interval=0.01)

    results = anyio.run(run)
    m = results[0].message
    assert m.stop_reason == "stop" and m.text().startswith("answer ")
    assert m.usage.cost is not None
    model = get_model("anthropic", "claude-haiku-4-5")
    full = 100 * model.prices.input / 1e6 + 20 * model.prices.output / 1e6
    assert m.usage.cost.total == pytest.approx(full / 2)


def test_expired_requests_are_messages_and_can_be_resubmitted(
    tmp_path: Path, monkeypatch: Any
) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)

    async def run() -> tuple[list[Any], list[Any]]:
        job = await submit(_requests(3), store=tmp_path, name="job")
        vendor.expire = {ln["custom_id"] for b in vendor.batches.values() for ln in b["lines"][1:]}
        first = await job.collect(interval=0.01)
        vendor.expire = set()
        assert await job.resubmit_expired() == 2
        return first, await job.collect(interval=0.01)

    first, second = anyio.run(run)
    assert [r.outcome for r in first] == ["succeeded", "expired", "expired"]
    assert first[1].message.error is not None and first[1].message.error.kind == "expired"
    assert [r.outcome for r in second] == ["succeeded"] * 3
    assert vendor.created == 2


def test_cancel_then_collect_gives_aborted_messages(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor(ended=False)
    install(monkeypatch, vendor)

    async def run() -> list[Any]:
        job = await submit(_requests(2), store=tmp_path, name="job")
        await job.cancel()
        job2 = open_job(tmp_path, "job")
        return await job2.collect(interval=0.01)

    results = anyio.run(run)
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    assert results[0].message.error is not None and results[0].message.error.kind == "aborted"


def test_a_request_stream_would_refuse_is_refused_at_submission(
    tmp_path: Path, monkeypatch: Any
) -> None:
    install(monkeypatch, Vendor())
    bad = _requests(2)
    bad[1] = BatchRequest(
        "q1", bad[1].model, bad[1].context, StreamOptions(api_key="k", extra={"no_such_key": 1})
    )

    async def run() -> None:
        await submit(bad, store=tmp_path, name="job")

    with pytest.raises(ValueError, match="'q1'.*no_such_key"):
        anyio.run(run)
    assert not (tmp_path / "job").exists()


def test_parts_are_split_at_the_vendors_bytes_and_none_is_over(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import dataclasses

    vendor = Vendor()
    codec = dataclasses.replace(vendor.codec(), max_bytes=4000)
    import stream_core.batch._plans as plans

    monkeypatch.setattr(plans, "batch_wire", lambda model: codec)
    model = get_model("anthropic", "claude-haiku-4-5")
    opts = StreamOptions(api_key="sk-test", max_tokens=100)
    reqs = [
        BatchRequest(f"q{i}", model, Context(messages=[UserMessage(content="x" * 900)]), opts)
        for i in range(7)
    ]
    parts, _, _ = plans.make_parts(reqs, "n0nce")
    assert len(parts) > 1
    for part in parts:
        size = sum(len(json.dumps(line, ensure_ascii=False).encode()) + 1 for line in part.lines)
        assert size <= codec.max_bytes
    assert [c for part in parts for c in part.ids] == [f"q{i}" for i in range(7)]
