"""The batch engine against a hostile world: kills between every pair of journal steps,
several workers on one job, a vendor that sends odd results, a store someone else can
touch, a journal edited or cut by hand. Each test is a defect found in review (issue 37)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from memory_codec import Crash, Vendor, install

from stream_core import Context, StreamOptions, UserMessage, configure_limits, get_model
from stream_core._limits import limiter
from stream_core._limits.file_store import FileStore
from stream_core._limits.limiter import GLOBAL_BUDGET
from stream_core.batch import BatchRequest, BatchResult, open_job, recover, submit
from stream_core.provider import BatchStatus, RawResult

HERE = Path(__file__).parent


def _requests(n: int, keys: tuple[str, ...] = ("sk-test",)) -> list[BatchRequest]:
    """Request i with key i % len(keys): one part per key."""
    model = get_model("anthropic", "claude-haiku-4-5")
    return [
        BatchRequest(
            f"q{i}",
            model,
            Context(messages=[UserMessage(content=f"q {i}")]),
            StreamOptions(api_key=keys[i % len(keys)], max_tokens=100),
        )
        for i in range(n)
    ]


def _budget(tmp_path: Path) -> Path:
    limits = tmp_path / "limits.json"
    configure_limits(store=str(limits), budget_usd=10.0)
    return limits


def _spent(limits: Path) -> float:
    return float(anyio.run(FileStore(limits).spent, GLOBAL_BUDGET))


def _held(tmp_path: Path) -> list[Any]:
    async def look() -> list[Any]:
        view = await limiter.inspect_limits()
        return [r for b in view.budgets for r in b.reservations]

    return anyio.run(look)


def _rows(job: Path) -> list[dict[str, Any]]:
    """The rows of results.jsonl (a line cut by a kill is not one)."""
    rows = []
    for x in (job / "results.jsonl").read_text().splitlines():
        try:
            rows.append(json.loads(x))
        except ValueError:
            continue
    return rows


def _cost(results: list[BatchResult]) -> float:
    return sum(r.message.usage.cost.total for r in results if r.message.usage.cost)


async def _run(n: int, store: Path) -> list[BatchResult]:
    job = await submit(_requests(n), store=store, name="job")
    return await job.collect(interval=0.01)


# --- kills between journal steps ------------------------------------------------------------


def test_a_kill_after_collected_before_settled_settles_on_restart(
    tmp_path: Path, monkeypatch: Any
) -> None:
    limits = _budget(tmp_path)
    vendor = Vendor()
    install(monkeypatch, vendor)
    settle = limiter.settle_budget
    calls = [0]

    async def killed(*args: Any, **kw: Any) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise Crash("settle")
        await settle(*args, **kw)

    monkeypatch.setattr(limiter, "settle_budget", killed)

    async def first() -> None:
        job = await submit(_requests(3), store=tmp_path, name="job")
        await job.collect(interval=0.01)

    with pytest.raises(Crash):
        anyio.run(first)

    async def again() -> list[BatchResult]:
        (job,) = await recover(tmp_path) or [open_job(tmp_path, "job")]
        return await job.collect(interval=0.01)

    results = anyio.run(again)
    assert len(results) == 3
    assert _held(tmp_path) == []
    assert _spent(limits) == pytest.approx(_cost(results))
    assert not vendor.files  # the part's files are cleaned too


def test_a_kill_after_a_hold_before_its_part_record_resumes(
    tmp_path: Path, monkeypatch: Any
) -> None:
    limits = _budget(tmp_path)
    vendor = Vendor()
    install(monkeypatch, vendor)
    hold = limiter.hold_budget
    calls = [0]

    async def killed(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        found = await hold(*args, **kw)
        if calls[0] == 2:  # the second part's hold is taken, its record never written
            raise Crash("hold")
        return found

    monkeypatch.setattr(limiter, "hold_budget", killed)
    reqs = _requests(4, keys=("sk-a", "sk-b"))

    async def first() -> None:
        await submit(reqs, store=tmp_path, name="job")

    with pytest.raises(Crash):
        anyio.run(first)

    async def again() -> list[BatchResult]:
        job = await submit(reqs, store=tmp_path, name="job")
        return await job.collect(interval=0.01)

    results = anyio.run(again)
    assert sorted(r.custom_id for r in results) == ["q0", "q1", "q2", "q3"]
    assert vendor.created == 2
    assert _held(tmp_path) == []
    assert _spent(limits) == pytest.approx(_cost(results))


def test_a_kill_before_any_hold_is_recovered_without_the_requests(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`recover` (no requests at hand) finishes a job killed at its first budget hold:
    never a job that "collects" nothing."""
    limits = _budget(tmp_path)
    vendor = Vendor()
    install(monkeypatch, vendor)
    hold = limiter.hold_budget

    async def killed(*args: Any, **kw: Any) -> Any:
        raise Crash("hold")

    monkeypatch.setattr(limiter, "hold_budget", killed)
    reqs = _requests(2)

    async def first() -> None:
        await submit(reqs, store=tmp_path, name="job")

    with pytest.raises(Crash):
        anyio.run(first)
    monkeypatch.setattr(limiter, "hold_budget", hold)

    async def again() -> list[BatchResult]:
        (job,) = await recover(tmp_path)
        return await job.collect(interval=0.01, timeout=5)

    results = anyio.run(again)
    assert [r.custom_id for r in results] == ["q0", "q1"]
    assert vendor.created == 1
    assert _held(tmp_path) == []
    assert _spent(limits) == pytest.approx(_cost(results))


def test_a_results_file_cut_mid_line_loses_no_row(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)

    async def first() -> None:
        job = await submit(_requests(4), store=tmp_path, name="job")
        vendor.crash_at = "result2"
        await job.collect(interval=0.01)

    with pytest.raises(Crash):
        anyio.run(first)
    path = tmp_path / "job" / "results.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the second row cut by the kill

    async def again() -> list[BatchResult]:
        return await open_job(tmp_path, "job").collect(interval=0.01)

    results = anyio.run(again)
    assert [r.custom_id for r in results] == ["q0", "q1", "q2", "q3"]
    assert sorted(r["id"] for r in _rows(tmp_path / "job")) == ["q0", "q1", "q2", "q3"]


def test_a_journal_cut_mid_line_keeps_the_records_after_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    vendor = Vendor(crash_at="after_create")
    install(monkeypatch, vendor)
    reqs = _requests(2)

    async def first() -> None:
        await submit(reqs, store=tmp_path, name="job")

    with pytest.raises(Crash):
        anyio.run(first)
    path = tmp_path / "job" / "journal.jsonl"
    path.write_bytes(path.read_bytes() + b'{"event":"step","part":0,"fi')  # a cut record

    async def again() -> list[BatchResult]:
        job = await submit(reqs, store=tmp_path, name="job")
        return await job.collect(interval=0.01)

    assert len(anyio.run(again)) == 2
    records = [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]
    events = [r["event"] for r in records]
    assert "submitted" in events and "collected" in events
    assert open_job(tmp_path, "job").batch_ids == ["batch2"]


# --- several workers on one job --------------------------------------------------------------


def test_four_tasks_on_one_job_collect_each_result_once(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)
    reqs = _requests(6, keys=("sk-a", "sk-b"))
    got: list[list[str]] = []

    async def worker() -> None:
        job = await submit(reqs, store=tmp_path, name="job")
        got.append([r.custom_id for r in await job.collect(interval=0.01)])

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(worker)

    anyio.run(run)
    assert vendor.created == 2
    assert len(got) == 4 and all(sorted(g) == [f"q{i}" for i in range(6)] for g in got)
    assert len(_rows(tmp_path / "job")) == 6


def test_four_processes_on_one_job_collect_each_result_once(tmp_path: Path) -> None:
    from batch_apis import by_name
    from crash_run import scenario

    from stream_core.testing import fake_vendor

    api = by_name("anthropic")
    limits = tmp_path / "limits.json"
    with fake_vendor(scenarios={api.model().id: scenario(6)}, batch_delay=0.2) as server:
        cfg = {
            "api": api.name, "url": server.url, "store": str(tmp_path / "jobs"), "name": "eval",
            "n": 6, "limits": str(limits), "budget": 50.0, "start": "submit",
        }  # fmt: skip
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        procs = [
            subprocess.Popen(
                [sys.executable, str(HERE / "crash_child.py"), json.dumps(cfg)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )  # fmt: skip
            for _ in range(4)
        ]
        outs = [p.communicate(timeout=90) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [o[1][-2000:] for o in outs]
        assert server.batches.created == 1
    for out, _ in outs:
        assert sorted(json.loads(out)["ids"]) == sorted(f"q{i}" for i in range(6))
    rows = _rows(tmp_path / "jobs" / "eval")
    assert sorted(r["id"] for r in rows) == sorted(f"q{i}" for i in range(6))
    spent = float(anyio.run(FileStore(limits).spent, GLOBAL_BUDGET))
    assert spent == pytest.approx(sum(r["message"]["usage"]["cost"]["total"] for r in rows))


def _in_thread(fn: Any, timeout: float = 20.0) -> Any:
    """Run `fn` (anyio.run) in a daemon thread: a deadlock fails the test, never hangs it."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = anyio.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise AssertionError("deadlock: the job's lock is waited on by its own holder")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_cancel_inside_a_results_loop_does_not_deadlock(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    install(monkeypatch, vendor)
    reqs = _requests(4, keys=("sk-a", "sk-b"))

    async def run() -> list[str]:
        job = await submit(reqs, store=tmp_path, name="job")
        seen = []
        async for r in job.results():
            seen.append(r.custom_id)
            if len(seen) == 1:
                await job.cancel()  # enough: stop the rest
        return seen

    seen = _in_thread(run)
    assert seen and len(set(seen)) == len(seen)


def test_a_second_job_object_inside_a_results_loop_does_not_deadlock(
    tmp_path: Path, monkeypatch: Any
) -> None:
    install(monkeypatch, Vendor())
    reqs = _requests(2)

    async def run() -> int:
        job = await submit(reqs, store=tmp_path, name="job")
        async for _ in job.results():
            await open_job(tmp_path, "job").resubmit_expired()
        return len(await open_job(tmp_path, "job").collect(interval=0.01))

    assert _in_thread(run) == 2


# --- untrusted vendor data -------------------------------------------------------------------


def _odd_results(vendor: Vendor, extra: list[RawResult], dup: bool) -> Any:
    codec = vendor.codec()
    inner = codec.results

    async def odd_results(s: Any, st: BatchStatus) -> Any:
        async for r in inner(s, st):
            yield r
            if dup:
                yield RawResult(r.custom_id, "errored", kind="server", message="dup")
        for r in extra:
            yield r

    return replace(codec, results=odd_results)


def test_unknown_ids_and_duplicate_lines_change_no_row(tmp_path: Path, monkeypatch: Any) -> None:
    vendor = Vendor()
    odd = [
        RawResult("x" * 10_000, "succeeded", body={}),
        RawResult("../../etc", "errored", message="?"),
        RawResult("", "expired"),
        RawResult(7, "errored"),  # type: ignore[arg-type]
        RawResult(["x"], "errored"),  # type: ignore[arg-type]
        RawResult(None, "succeeded", body={"content": "x"}),  # type: ignore[arg-type]
    ]
    codec = _odd_results(vendor, odd, dup=True)
    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: codec)

    async def run() -> list[BatchResult]:
        job = await submit(_requests(3), store=tmp_path, name="job")
        return await job.collect(interval=0.01)

    results = anyio.run(run)
    assert [r.outcome for r in results] == ["succeeded"] * 3
    assert len(_rows(tmp_path / "job")) == 3


def test_a_lone_surrogate_in_a_vendor_answer_is_collected(tmp_path: Path, monkeypatch: Any) -> None:
    """JSON may escape half a surrogate pair ("\\ud83d"): the row is still written, and
    read back as the same message."""
    vendor = Vendor()
    codec = vendor.codec()
    inner = codec.results

    async def odd_results(s: Any, st: BatchStatus) -> Any:
        async for r in inner(s, st):
            if r.body is not None:
                body = json.loads(json.dumps(r.body).replace("answer", "answer \\ud83d"))
                r = replace(r, body=body)
            else:
                r = replace(r, message="bad \ud83d")
            yield r

    vendor.expire = {"x"}
    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: replace(codec, results=odd_results))

    async def run() -> tuple[list[BatchResult], list[BatchResult]]:
        job = await submit(_requests(2), store=tmp_path, name="job")
        return await job.collect(interval=0.01), open_job(tmp_path, "job").stored_results()

    results, stored = anyio.run(run)
    assert [r.message.text() for r in results] == [r.message.text() for r in stored]
    assert "\ud83d" in results[0].message.text()
    (tmp_path / "job" / "results.jsonl").read_text(encoding="utf-8")  # valid UTF-8


# --- the store -------------------------------------------------------------------------------


def test_the_job_directory_is_private(tmp_path: Path, monkeypatch: Any) -> None:
    install(monkeypatch, Vendor())
    os.umask(0o022)
    anyio.run(lambda: _run(2, store=tmp_path / "store"))
    job = tmp_path / "store" / "job"
    assert stat.S_IMODE(job.stat().st_mode) == 0o700
    for f in job.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f.name


def test_a_job_directory_that_is_a_symlink_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    """Another user, in a shared store, links the job's name to a directory of theirs."""
    install(monkeypatch, Vendor())
    store = tmp_path / "store"
    store.mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    (store / "job").symlink_to(theirs)

    with pytest.raises(PermissionError, match="symlink"):
        anyio.run(lambda: _run(2, store=store))
    assert list(theirs.iterdir()) == []


def test_a_job_directory_open_to_others_is_made_private(tmp_path: Path, monkeypatch: Any) -> None:
    install(monkeypatch, Vendor())
    store = tmp_path / "store"
    (store / "job").mkdir(parents=True)
    os.chmod(store / "job", 0o777)
    assert len(anyio.run(lambda: _run(2, store=store))) == 2
    assert stat.S_IMODE((store / "job").stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace('"tag":', '"tog":'),
        lambda t: t.replace('"model":{"id":', '"model":{"id":7,"was":'),
        lambda t: t.replace('"count":', '"count":"many","c":'),
        lambda t: t.replace('"batch_id":"', '"batch_id":null,"b":"'),
        lambda t: t.replace('"nonce":"', '"nonce":[],"n":"'),
    ],
    ids=["no-tag", "bad-model", "bad-count", "null-batch-id", "bad-nonce"],
)
def test_a_journal_edited_by_hand_is_a_clear_error(
    tmp_path: Path, monkeypatch: Any, edit: Any
) -> None:
    install(monkeypatch, Vendor(ended=False))

    async def first() -> None:
        await submit(_requests(2), store=tmp_path, name="job")

    anyio.run(first)
    path = tmp_path / "job" / "journal.jsonl"
    path.write_text(edit(path.read_text()))
    with pytest.raises(ValueError, match="journal.jsonl"):
        open_job(tmp_path, "job")


def test_a_requests_file_edited_by_hand_is_a_clear_error(tmp_path: Path, monkeypatch: Any) -> None:
    install(monkeypatch, Vendor(ended=False))

    async def first() -> None:
        await submit(_requests(2), store=tmp_path, name="job")

    anyio.run(first)
    path = tmp_path / "job" / "requests.jsonl"
    path.write_text(path.read_text().replace('"vid":', '"vod":'))
    with pytest.raises(ValueError, match="requests.jsonl"):
        open_job(tmp_path, "job")


def test_a_results_row_edited_by_hand_is_a_clear_error(tmp_path: Path, monkeypatch: Any) -> None:
    install(monkeypatch, Vendor())
    anyio.run(lambda: _run(2, store=tmp_path))
    path = tmp_path / "job" / "results.jsonl"
    path.write_text(path.read_text().replace('"message":{', '"message":7,"m":{', 1))
    with pytest.raises(ValueError, match="results.jsonl"):
        open_job(tmp_path, "job").stored_results()


def test_a_foreign_or_broken_entry_does_not_stop_recover(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """A shared store holding another user's link and a journal edited by hand: `recover`
    still finishes this user's job, says what it skipped, and `open_job` refuses the link."""
    vendor = Vendor(crash_at="create")
    install(monkeypatch, vendor)
    store = tmp_path / "store"
    reqs = _requests(2)

    async def first() -> None:
        await submit(reqs, store=store, name="job")

    with pytest.raises(Crash):
        anyio.run(first)
    (tmp_path / "theirs").mkdir()
    (store / "evil").symlink_to(tmp_path / "theirs")
    (store / "broken").mkdir(mode=0o700)
    (store / "broken" / "journal.jsonl").write_text('{"event":"job","nonce":7}\n')

    async def again() -> list[BatchResult]:
        (job,) = await recover(store)
        return await job.collect(interval=0.01, timeout=5)

    assert [r.custom_id for r in anyio.run(again)] == ["q0", "q1"]
    assert "evil skipped" in caplog.text and "broken skipped" in caplog.text
    with pytest.raises(PermissionError, match="symlink"):
        open_job(store, "evil")


def test_results_are_synced_before_the_part_is_recorded_collected(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Rows are appended unsynced; the `collected` record is fsync'ed. A power cut between
    the two must not leave a part 'collected' whose rows never reached the disk."""
    install(monkeypatch, Vendor())
    import stream_core.batch._journal as journal_mod

    order: list[str] = []
    fsync = os.fsync

    def watched(fd: int) -> None:
        order.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", watched)
    record = journal_mod.Journal.record

    def recorded(self: Any, event: str, **fields: Any) -> None:
        order.append(event)
        record(self, event, **fields)

    monkeypatch.setattr(journal_mod.Journal, "record", recorded)
    anyio.run(lambda: _run(2, store=tmp_path))
    assert "results.jsonl" in order[: order.index("collected")]


def test_a_part_ended_without_some_results_keeps_the_vendor_files(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """The vendor says ended but its results lack some lines (a file not yet whole, a
    codec that missed one): those requests are errors (protocol), never missing rows, and
    the vendor's files, the only copy of what it may have billed, are not deleted (nor by
    a later run)."""
    vendor = Vendor()
    codec = vendor.codec()
    inner = codec.results

    async def first_line_only(s: Any, st: BatchStatus) -> Any:
        async for r in inner(s, st):
            yield r
            return

    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(
        job_mod, "batch_wire", lambda model: replace(codec, results=first_line_only)
    )

    async def run() -> list[BatchResult]:
        results = await _run(3, store=tmp_path)
        await open_job(tmp_path, "job").collect(interval=0.01)  # a later run
        return results

    results = anyio.run(run)
    assert [r.outcome for r in results] == ["succeeded", "errored", "errored"]
    assert results[1].message.error is not None and results[1].message.error.kind == "protocol"
    assert vendor.files  # kept
    assert "ended without a result for 2 requests" in caplog.text


def test_poll_during_another_workers_submission_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A progress display polls while a worker uploads: it says "submitting" at once, not
    after the whole upload (nor does it submit in the worker's place)."""
    vendor = Vendor()
    codec = vendor.codec()
    inner = codec.submit
    box: dict[str, Any] = {}

    async def slow_submit(s: Any, part: Any) -> str:
        box["entered"].set()
        await box["release"].wait()
        return await inner(s, part)

    install(monkeypatch, vendor)
    import stream_core.batch._job as job_mod

    monkeypatch.setattr(job_mod, "batch_wire", lambda model: replace(codec, submit=slow_submit))

    async def run() -> Any:
        box["entered"], box["release"] = anyio.Event(), anyio.Event()
        seen: list[Any] = []

        async def watcher() -> None:
            await box["entered"].wait()
            seen.append(await open_job(tmp_path, "job").poll())
            box["release"].set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher)
            await submit(_requests(2), store=tmp_path, name="job")
        return seen[0]

    progress = _in_thread(run)
    assert (progress.state, progress.total, progress.pending) == ("submitting", 2, 2)
    assert vendor.created == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_fifty_tasks_of_one_process_on_one_job_never_stall(tmp_path: Path, backend: str) -> None:
    """Each task waiting on the job's file lock held a worker thread; past anyio's 40 the
    task holding the job waited for a thread of its own (a connection) forever."""
    from batch_apis import by_name
    from crash_child import requests
    from crash_run import scenario

    from stream_core.testing import fake_vendor

    api = by_name("anthropic")
    with fake_vendor(scenarios={api.model().id: scenario(4)}) as server:
        reqs = requests(api.name, server.url.replace("127.0.0.1", "localhost"), 4)
        got: list[int] = []

        async def worker() -> None:
            job = await submit(reqs, store=tmp_path, name="job")
            got.append(len(await job.collect(interval=0.01)))

        async def run() -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(worker)

        box: dict[str, Any] = {}
        t = threading.Thread(
            target=lambda: box.setdefault("error", _catch(anyio.run, run, backend=backend)),
            daemon=True,
        )
        t.start()
        t.join(60)
        assert not t.is_alive(), "stalled: every worker thread waits on the job's lock"
        assert box["error"] is None
        assert got == [4] * 50 and server.batches.created == 1


def _catch(fn: Any, *args: Any, **kw: Any) -> BaseException | None:
    try:
        fn(*args, **kw)
    except BaseException as exc:  # noqa: BLE001 - handed to the test
        return exc
    return None
