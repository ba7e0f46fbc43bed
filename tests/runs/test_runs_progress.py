"""`Progress`: four worker processes add their results to one run in a shared store (a
file, a real redis-server) and any process reads the same counts, spend and rate; the
line, its rate and its ETA come from the times the store kept, here pinned."""

from __future__ import annotations

import math
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis_server import session_url
from runs_worker import message

from stream_core import AssistantMessage, Cost, StreamError, Usage, configure_limits
from stream_core._cli import main
from stream_core.runs import Progress, ProgressView
from stream_core.runs._progress import view as _view

pytestmark = pytest.mark.anyio
WORKER = Path(__file__).with_name("runs_worker.py")
N = 40  # results per worker


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


def _expected(total: int) -> dict[str, Any]:
    messages = [message(i) for i in range(total)]
    failed = [m.error.kind for m in messages if m.error is not None]
    return {
        "done": total,
        "failed": len(failed),
        "failed_kinds": {k: failed.count(k) for k in sorted(set(failed))},
        "usd": math.fsum(m.usage.cost.total for m in messages if m.usage.cost is not None),
        "unpriced": sum(m.usage.cost is None for m in messages),
        "input": sum(m.usage.input for m in messages),
        "cache_read": sum(m.usage.cache_read for m in messages),
    }


def _run_workers(store: str, name: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "progress", store, name, str(w), str(N)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(4)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()


async def _check(store: str, name: str) -> ProgressView:
    _run_workers(store, name)
    configure_limits(store=store, timeout=5.0)
    view = await Progress(name, total=4 * N).read()
    want = _expected(4 * N)
    assert (view.done, view.failed, view.failed_kinds) == (
        want["done"], want["failed"], want["failed_kinds"],
    )  # fmt: skip
    assert view.usd == want["usd"]  # binary fractions: exact in any order
    assert view.unpriced == want["unpriced"]
    assert view.tokens["input"] == want["input"]
    assert view.tokens["output"] == 5 * 4 * N
    assert view.tokens["cache_read"] == want["cache_read"]
    assert view.first_at is not None and view.latest_at is not None
    assert view.first_at <= view.latest_at
    assert view.eta == 0.0  # all done
    line = Progress(name, total=4 * N).line(view)
    assert line.startswith(f"160/160 done · {want['failed']} failed · ${want['usd']:,.2f}")
    assert "ETA" not in line
    return view


ONE_LOOP = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the workers do the work


@ONE_LOOP
async def test_four_processes_count_one_run_in_a_file_store(tmp_path: Path) -> None:
    await _check(str(tmp_path / "limits.json"), "eval-file")


@ONE_LOOP
async def test_four_processes_count_one_run_in_redis(redis_url: str) -> None:
    await _check(redis_url, f"eval-{uuid.uuid4().hex[:8]}")


async def test_each_run_counts_alone_and_add_takes_rows_and_batch_results(tmp_path: Path) -> None:
    from stream_core.batch import BatchResult
    from stream_core.runs import ResultLog

    configure_limits(store=str(tmp_path / "limits.json"))
    a, b = Progress("a", total=3), Progress("b")
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("x", message(3))
    await a.add(message(0))
    await a.add(next(iter(ResultLog.read(path))))
    await a.add(BatchResult("y", "succeeded", message(1), "batch_1"))
    await b.add(message(2))
    va, vb = await a.read(), await b.read()
    assert (va.done, va.failed, va.failed_kinds) == (3, 1, {"rate_limit": 1})
    assert (vb.done, vb.total, vb.eta) == (1, None, None)
    assert a.line(va).startswith("3/3 done · 1 failed")
    assert b.line(vb).startswith("1 done · 0 failed")
    with pytest.raises(TypeError, match="AssistantMessage"):
        await a.add("text")


async def test_an_in_process_run_counts_too() -> None:
    p = Progress("local", total=10)
    await p.add(message(0))
    assert (await p.read()).done == 1


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        Progress("")
    with pytest.raises(TypeError, match="total"):
        Progress("x", total=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0 or more"):
        Progress("x", total=-1)


# --- the line, with the workers' clocks pinned --------------------------------------------

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def _add(p: Progress, clock: Clock, at: float, n: int = 1, **usage: Any) -> None:
    clock.now = at
    for _ in range(n):
        await p.add(_message(**usage))


def _message(kind: str | None = None, usd: float | None = 0.0) -> AssistantMessage:
    return AssistantMessage(
        api="faux", provider="p", model="m",
        usage=Usage(input=1, cost=None if usd is None else Cost(total=usd)),
        stop_reason="error" if kind else "stop",
        error=StreamError(kind=kind, message="x") if kind else None,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_rate_and_eta_come_from_every_workers_times() -> None:
    """Two workers (of one process here: the processes sharing a store are above): the
    first result at T0 (worker a), the latest at T0 + 1,203/41.2 s (worker b): 1,204
    results at 41.2 a second, whichever worker reads."""
    ca, cb = Clock(T0), Clock(T0)
    a = Progress("eval", total=2000, clock=ca)
    b = Progress("eval", total=2000, clock=cb)
    await _add(a, ca, T0, usd=0.23)
    await _add(b, cb, T0 + 1, n=600)
    await _add(a, ca, T0 + 2, n=590)
    await _add(a, ca, T0 + 3, n=7, kind="rate_limit")
    await _add(a, ca, T0 + 3, n=2, kind="timeout")
    await _add(a, ca, T0 + 10)
    await _add(b, cb, T0 + 1203 / 41.2, n=2)
    await _add(a, ca, T0 + 20)  # a's latest is before b's
    for reader in (a, b, Progress("eval", total=2000)):
        view = await reader.read()
        assert (view.done, view.failed, view.usd) == (1204, 9, 0.23)
        assert view.failed_kinds == {"rate_limit": 7, "timeout": 2}
        assert view.first_at == T0
        assert view.latest_at == pytest.approx(T0 + 1203 / 41.2)
        assert view.rate == pytest.approx(41.2)
        assert view.eta == pytest.approx(796 / 41.2)
        assert reader.line(view) == "1,204/2,000 done · 9 failed · $0.23 · 41.2/s · ETA 19s"


@pytest.mark.parametrize(
    ("steps", "total", "line"),
    [
        ([], 10, "0/10 done · 0 failed · $0"),
        # One result: no rate yet (the first result starts the clock).
        ([(0, 1, {"usd": 0.0042})], 10, "1/10 done · 0 failed · $0.0042"),
        # Slow: per minute, an ETA in minutes and hours.
        ([(0, 1, {}), (60, 3, {})], 100, "4/100 done · 0 failed · $0 · 3.0/min · ETA 32m00s"),
        ([(0, 1, {}), (120, 2, {})], 200, "3/200 done · 0 failed · $0 · 1.0/min · ETA 3h17m"),
        # Unknown total: no ETA; unpriced results said.
        ([(0, 9, {"usd": 1234.5 / 9}), (5, 2, {"usd": None})], None,
         "11 done · 0 failed · $1,234.50 (+2 unpriced) · 2.0/s"),
        # Finished: no ETA.
        ([(0, 1, {}), (4, 4, {})], 5, "5/5 done · 0 failed · $0 · 1.0/s"),
        # Days.
        ([(0, 1, {}), (86_400, 1, {})], 10, "2/10 done · 0 failed · $0 · 0.042/h · ETA 8d00h"),
    ],
)  # fmt: skip
async def test_line_shapes(
    steps: list[tuple[float, int, dict[str, Any]]], total: int | None, line: str
) -> None:
    clock = Clock(T0)
    p = Progress("shapes", total=total, clock=clock)
    for at, n, usage in steps:
        await _add(p, clock, T0 + at, n, **usage)
    assert p.line(await p.read()) == line


def test_junk_in_the_store_reads_as_nothing() -> None:
    view = _view("x", 3, {"done": math.nan, "usd": math.inf, "failed": -0.0, "first:a": -5})
    assert (view.done, view.usd, view.failed, view.first_at) == (0, 0.0, 0, None)


# --- the command ----------------------------------------------------------------------------


async def _fill(store: str) -> None:
    configure_limits(store=store)
    p = Progress("cli-run", total=4)
    for i in (0, 1, 3):
        await p.add(message(i))
    configure_limits()


def test_the_progress_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "limits.json")
    anyio.run(_fill, store)
    assert main(["progress", "cli-run", "--store", store, "--total", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3/4 done · 1 failed · $0.") and out.count("\n") == 1
    assert main(["progress", "cli-run", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("3 done · 1 failed")
    # --watch stops once the total is done.
    assert main(["progress", "cli-run", "--store", store, "--total", "3", "--watch", "0.05"]) == 0
    assert capsys.readouterr().out.count("\n") == 1


def test_the_progress_command_refuses_a_bad_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["progress", "x", "--store", "ftp://host/x"]) == 2
    assert "--store: ftp:// is not a store" in capsys.readouterr().err
    assert main(["progress", "x", "--store", "s", "--watch", "0"]) == 2
    assert main(["progress", "x"]) == 2


def test_the_progress_command_says_a_store_is_down_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["progress", "x", "--store", "redis://:hunter2pw@127.0.0.1:1/0"]) == 1
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "hunter2pw" not in err
