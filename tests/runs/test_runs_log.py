"""`ResultLog`: results keyed by the caller's id, one JSON line each as it arrives; a rerun
skips exactly what was recorded, after a `kill -9` at any point, with a cut last line;
several processes append to one file and no row is lost, cut or doubled."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from runs_worker import message

from stream_core import AssistantMessage, Context, StreamError, UserMessage, complete
from stream_core.runs import ResultLog, ResultRow
from stream_core.testing import faux_model

WORKER = Path(__file__).with_name("runs_worker.py")


def _ids(path: Path) -> list[str | int]:
    return [row.id for row in ResultLog.read(path)]


def test_a_row_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultLog(path) as log:
        log.write("q1", message(1), prompt_set="v2", tags=["a", "b"])
        log.write(7, message(3))  # failed: rate_limit
    rows = list(ResultLog.read(path))
    assert [r.id for r in rows] == ["q1", 7]
    first, second = rows
    assert isinstance(first, ResultRow)
    assert first.message == message(1)
    assert first.message.tool_calls()[0].arguments == {"id": "1", "q": '{"id":'}
    assert (first.outcome, first.kind, first.provider, first.model) == (
        "ok",
        None,
        "prov-a",
        "model-1",
    )
    assert first.usd == 0.125 + 1 / 64
    assert dict(first.extra) == {"prompt_set": "v2", "tags": ["a", "b"]}
    assert (second.outcome, second.kind) == ("error", "rate_limit")
    assert first.at > 0 and not first.batch
    # The line itself: the row's own fields first, the message last, one line each.
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    data = json.loads(lines[0])
    assert list(data)[:7] == ["id", "outcome", "kind", "provider", "model", "usd", "at"]
    assert list(data)[-1] == "message" and data["message"]["usage"]["cost"]["total"] == first.usd


def test_done_counts_successes_and_the_kinds_you_name(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        for i in (1, 2, 3, 10):  # 3: rate_limit, 10: timeout
            log.write(str(i), message(i))
        assert log.done == {"1", "2"}
        assert log.failed == {"3": "rate_limit", "10": "timeout"}
        assert log.pending(["1", "3", "4", "10", "4"]) == ["3", "4", "10", "4"]
    assert ResultLog(path).done == {"1", "2"}
    assert ResultLog(path, done_kinds={"timeout"}).done == {"1", "2", "10"}
    assert ResultLog(path, done_kinds="all").done == {"1", "2", "3", "10"}
    assert ResultLog(path, done_kinds="all").failed == {}
    # A failure retried with success is done, whichever came first.
    with ResultLog(path) as log:
        log.write("3", message(1))
    again = ResultLog(path)
    assert again.done == {"1", "2", "3"} and again.failed == {"10": "timeout"}
    # "1" and 1 are different ids.
    assert ResultLog(path).pending([1, "1"]) == [1]


def test_bad_arguments_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    log = ResultLog(path)
    with pytest.raises(ValueError, match="outcome"):
        log.write("a", message(1), outcome="mine")
    with pytest.raises(TypeError, match="str or an int"):
        log.write(1.5, message(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str or an int"):
        log.write(True, message(1))
    with pytest.raises(TypeError):
        log.write("a", message(1), when=object())
    with pytest.raises(ValueError, match="JSON"):
        log.write("a", message(1), score=float("nan"))
    with pytest.raises(TypeError, match="AssistantMessage"):
        log.write("a", {"role": "assistant"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="done_kinds"):
        ResultLog(path, done_kinds="rate_limit")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not error kinds: 'ratelimit'"):
        ResultLog(path, done_kinds={"ratelimit"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sync_every"):
        ResultLog(path, sync_every=-1)
    log.close()
    assert not path.exists() or path.read_bytes() == b""
    assert log.done == set()


def test_a_cut_last_line_is_skipped_and_the_next_row_starts_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        for i in range(3):
            log.write(i, message(i))
    whole = path.read_bytes()
    path.write_bytes(whole + whole.split(b"\n")[1][:57])  # a writer killed mid-line
    assert _ids(path) == [0, 1, 2]
    log = ResultLog(path)
    assert log.done == {0, 1, 2}
    log.write(5, message(5))
    log.close()
    assert _ids(path) == [0, 1, 2, 5]
    assert ResultLog(path).cut_lines == 1


def test_a_row_glued_to_a_cut_line_is_not_lost(tmp_path: Path) -> None:
    """A writer without the lock (another tool, a network file system) may append right
    after a line a killed worker cut: the row after it is still read."""
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("a", message(1))
        log.write("b", message(2))
    a, b = path.read_bytes().split(b"\n")[:2]
    # Cut inside the tool call's arguments, right after `{"id":"1"}`: that nested object
    # is whole JSON, but not a row.
    at = a.index(b'{"id":"1"') + a[a.index(b'{"id":"1"') :].index(b"}") + 1
    path.write_bytes(a[:at] + b + b"\n")
    rows = list(ResultLog.read(path))
    assert [r.id for r in rows] == ["b"] and rows[0].message == message(2)
    assert ResultLog(path).done == {"b"}


def test_a_whole_line_that_is_no_row_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("a", message(1))
    with path.open("a") as f:
        f.write('{"id": "b", "message": {"role": "assistant"}}\n')
    with pytest.raises(ValueError, match="line 2: not a result row"):
        list(ResultLog.read(path))
    with pytest.raises(ValueError, match="line 2"):
        ResultLog(path)


def test_refresh_reads_what_other_writers_appended(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    mine, theirs = ResultLog(path), ResultLog(path)
    mine.write("a", message(1))
    assert theirs.done == set()
    theirs.refresh()
    assert theirs.done == {"a"}
    # Half a line (being written) is left for later, then read once whole.
    line = path.read_bytes()
    with path.open("ab") as f:
        f.write(line.replace(b'"a"', b'"z"', 1)[:-30])
    theirs.refresh()
    assert theirs.done == {"a"}
    with path.open("ab") as f:
        f.write(line.replace(b'"a"', b'"z"', 1)[-30:])
    theirs.refresh()
    assert theirs.done == {"a", "z"} and theirs.cut_lines == 0
    mine.close()
    theirs.close()


def test_a_row_from_a_stream_and_one_from_a_batch(tmp_path: Path) -> None:
    """The same log takes a streamed answer and a batch's result (its `batch_id`)."""
    model = faux_model(["streamed answer"])
    streamed = anyio.run(complete, model, Context(messages=[UserMessage(content="hi")]))
    errored = AssistantMessage(
        api="faux", provider="p", model="m", stop_reason="error",
        error=StreamError(kind="expired", message="not run in the window"),
    )  # fmt: skip
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("s", streamed)
        log.write("b", errored, batch_id="batch_123")
    rows = list(ResultLog.read(path))
    assert rows[0].message.text() == "streamed answer" and not rows[0].batch
    assert (
        rows[1].batch and rows[1].kind == "expired" and rows[1].extra == {"batch_id": "batch_123"}
    )


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_rerun_after_kill_9_skips_exactly_what_was_recorded(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    n = 300
    path = tmp_path / "results.jsonl"
    # Some rows large: a line is written by one write() call whatever its size.
    args = [sys.executable, str(WORKER), "log", str(path), str(n)]
    proc = subprocess.Popen([*args, "1", "0.002", str(rng.choice([0, 20000]))])
    stop_at = rng.randrange(1, n - 20)
    deadline = time.monotonic() + 60
    while _lines(path) < stop_at and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    if seed % 2:
        # As if the kill landed inside write(): the last line cut at a random byte.
        data = path.read_bytes()
        last = data.rstrip(b"\n").rfind(b"\n") + 1
        path.write_bytes(data[: rng.randrange(last + 1, len(data) - 1)])
    recorded = _ids(path)
    assert recorded == [str(i) for i in range(len(recorded))]  # in order, none doubled
    assert len(recorded) >= stop_at - (seed % 2)
    done = ResultLog(path).done  # a failure (every 7th) is not done: the rerun retries it
    assert done == {i for i in recorded if int(i) % 7 != 3}
    subprocess.run([*args, "2", "0", "0"], check=True, capture_output=True, timeout=120)
    rows = list(ResultLog.read(path))
    assert [r.id for r in rows if r.extra["run"] == "1"] == recorded  # none lost
    assert [r.id for r in rows if r.extra["run"] == "2"] == [
        str(i) for i in range(n) if str(i) not in done
    ]
    assert {r.id for r in rows} == {str(i) for i in range(n)}
    for r in rows:
        assert r.message == message(int(r.id), r.message.text().count("x"))
    assert ResultLog(path).cut_lines == seed % 2


def test_four_processes_append_to_one_log(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    n, big = 150, 70_000  # lines up to ~140 kB: far past a pipe's atomic write size
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), "ids", str(path), f"w{w}", str(n), str(big)])
        for w in range(4)
    ]
    for p in procs:
        assert p.wait(120) == 0
    rows = list(ResultLog.read(path))
    assert len(rows) == 4 * n
    assert Counter(r.id for r in rows) == Counter(f"w{w}-{k}" for w in range(4) for k in range(n))
    for r in rows:
        k = int(str(r.id).split("-")[1])
        assert r.message == message(k, big * (k % 3))
        assert r.extra == {"worker": str(r.id).split("-")[0]}
    log = ResultLog(path)
    assert log.cut_lines == 0 and len(log.done) == 4 * n - len(log.failed)
