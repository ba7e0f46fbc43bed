"""One crash of a real process at one step of a batch job, then its restart, against the
fake vendor in this process (tests/batch/test_crash.py asserts; benchmarks/batch.py
prints the table).

The child (crash_child.py) submits and collects N requests. It is killed with SIGKILL at
one of `POINTS`:

- `upload`: its first upload is in flight (held before the vendor reads it, then dropped:
  nothing stored); APIs whose create carries the requests have no upload; where the
  upload goes to an S3 server of its own (Bedrock: moto), the child stops before its PUT;
- `uploaded`: the vendor stored the upload, its answer (the file id) never reached it
  (S3: the child stops once the PUT is answered, before recording it);
- `create-sent`: its create is in flight (held before the vendor handles it, dropped);
- `created`: the vendor created the batch (billed), its answer (the id) never reached it;
- `submitted`: the journal says `submitted`, nothing collected;
- `results`: results.jsonl has K of N rows;
- `collected`: every row written and the part recorded collected, its budget hold not yet
  settled;
- `settled`: the hold settled, the part's files not yet deleted.

Then a second child restarts it (`submit` by the same name, or `recover(store)`, the two
taking turns by point) and collects. What it shows (`Outcome`): rows written and unique
ids, batches the vendor created, batches left neither collected nor cancelled, files left,
budget spent against the results' cost, settlements journaled.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from batch_apis import API, path_pattern
from crash_child import requests

from stream_core._limits.file_store import FileStore
from stream_core._limits.limiter import GLOBAL_BUDGET
from stream_core.batch import submit
from stream_core.testing import FakeVendor, fake_vendor, faux_text
from stream_core.testing._batch_hold import Hold

__all__ = ["POINTS", "Outcome", "crash", "scenario", "submission_requests"]

HERE = Path(__file__).parent
CHILD = HERE / "crash_child.py"

POINTS = [
    "upload",
    "uploaded",
    "create-sent",
    "created",
    "submitted",
    "results",
    "collected",
    "settled",
]
RESTART = {p: ("submit" if i % 2 == 0 else "recover") for i, p in enumerate(POINTS)}
BUDGET = 50.0


def scenario(n: int) -> list[Any]:
    """Answers enough for two runs of every request (a batch created twice would show)."""
    from stream_core import Usage

    return [faux_text(f"answer {i}", usage=Usage(input=100, output=20)) for i in range(3 * n)]


_SEEN: dict[str, tuple[list[tuple[str, str]], tuple[str, str]]] = {}


def submission_requests(api: API) -> tuple[list[tuple[str, str]], tuple[str, str]]:
    """(the uploads, the create) a submission of `api` sends the fake vendor, as (method,
    path pattern): learned once from a run in this process."""
    if api.name in _SEEN:
        return _SEEN[api.name]
    log = io.StringIO()
    model = api.model()
    n = api.min_requests()
    with (
        fake_vendor(scenarios={model.id: scenario(n)}, log=log) as server,
        tempfile.TemporaryDirectory() as store,
    ):
        api.prepare(server)

        async def run() -> None:
            await submit(
                requests(api.name, server.url, n),
                store=store,
                name="probe",
                settings=api.settings(server.url),
            )

        anyio.run(run)
    sent: list[tuple[str, str]] = []
    for line in log.getvalue().splitlines():
        if not line.endswith("(batch)"):
            continue
        method, target = line.split(" ", 2)[:2]
        if method in ("POST", "PUT"):
            sent.append((method, path_pattern(target.split("?", 1)[0])))
    if not sent:
        raise AssertionError(f"{api.name}: a submission sent no batch request:\n{log.getvalue()}")
    found = (sent[:-1], sent[-1])
    _SEEN[api.name] = found
    return found


@dataclass
class Outcome:
    """What a restart after one kill shows."""

    api: str
    point: str
    restart: str
    n: int
    skipped: str | None = None
    rows: int = 0
    unique: int = 0
    created: int = 0
    parts: int = 0
    orphans: list[str] = field(default_factory=list)
    """Vendor batches neither collected by the job nor cancelled."""
    files_left: int = 0
    spent: float = 0.0
    cost: float = 0.0
    settled: int = 0
    """`settled` records in the journal."""
    first_rc: int | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return (
            self.skipped is None
            and not self.error
            and self.rows == self.n
            and self.unique == self.n
            and self.created == self.parts
            and not self.orphans
            and abs(self.spent - self.cost) <= 1e-9 + 1e-9 * self.cost
            and self.settled == self.parts
        )


def _child(cfg: dict[str, Any]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_marker(proc: subprocess.Popen[str], marker: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the child ended (rc {proc.returncode}) before its pause:\n"
                                 f"{out}\n{err[-3000:]}")  # fmt: skip
        if time.monotonic() > deadline:
            raise AssertionError("the child never reached its pause")
        time.sleep(0.01)


def _wait_hold(proc: subprocess.Popen[str], hold: Hold, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not hold.wait(0.02):
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the child ended (rc {proc.returncode}) before the hold:\n"
                                 f"{out}\n{err[-3000:]}")  # fmt: skip
        if time.monotonic() > deadline:
            raise AssertionError("the held request never came")


def _kill(proc: subprocess.Popen[str]) -> int:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    return proc.returncode


def crash(
    api: API, point: str, root: Path, *, n: int = 6, delay: float = 0.1, timeout: float = 60.0
) -> Outcome:
    """Kill a child at `point`, restart it, and say what the restart shows (`n` requests,
    or the vendor's least)."""
    n = max(n, api.min_requests())
    restart = RESTART[point]
    out = Outcome(api.name, point, restart, n)
    uploads, create = submission_requests(api)
    if point in ("upload", "uploaded") and not uploads and not api.s3:
        out.skipped = "no upload: the create carries the requests"
        return out
    root.mkdir(parents=True, exist_ok=True)
    store, limits, marker = root / "jobs", root / "limits.json", root / "paused"
    model = api.model()
    with fake_vendor(scenarios={model.id: scenario(n)}, batch_delay=delay) as server:
        api.prepare(server)
        base = {
            "api": api.name, "url": server.url, "store": str(store), "name": "eval",
            "n": n, "limits": str(limits), "budget": BUDGET,
        }  # fmt: skip
        hold: Hold | None = None
        pause = None
        if point in ("upload", "uploaded") and not uploads:
            pause = point  # the upload goes to the S3 server: the child stops at its PUT
        elif point in ("upload", "uploaded"):
            method, pattern = uploads[0]
            hold = server.batches.holds.add(
                method, pattern, when="before" if point == "upload" else "after"
            )
        elif point in ("create-sent", "created"):
            method, pattern = create
            hold = server.batches.holds.add(
                method, pattern, when="before" if point == "create-sent" else "after"
            )
        else:
            pause = f"results:{n // 2}" if point == "results" else point
        first = _child({**base, "pause": pause, "marker": str(marker), "start": "submit"})
        try:
            if hold is not None:
                _wait_hold(first, hold, timeout)
            else:
                _wait_marker(first, marker, timeout)
        finally:
            out.first_rc = _kill(first) if first.poll() is None else first.returncode
            if hold is not None:
                if hold.when == "before":
                    hold.drop()
                else:
                    hold.release()
            server.batches.holds.release_all()
        second = _child({**base, "start": restart})
        try:
            stdout, stderr = second.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(second)
            out.error = "the restart did not end"
            return out
        if second.returncode != 0:
            out.error = f"the restart failed (rc {second.returncode}): {stderr[-2000:]}"
        _read(out, server, store / "eval", limits)
    return out


def _among(vendor_id: str, ours: set[str]) -> bool:
    """A fake's batch among the job's ids (Bedrock's id is the job's ARN, ending in it)."""
    return any(b == vendor_id or b.endswith("/" + vendor_id) for b in ours)


def _read(out: Outcome, server: FakeVendor, job: Path, limits: Path) -> None:
    rows = [json.loads(x) for x in (job / "results.jsonl").read_text().splitlines() if x.strip()]
    out.rows = len(rows)
    out.unique = len({r["id"] for r in rows})
    out.cost = sum((r["message"]["usage"].get("cost") or {}).get("total", 0.0) for r in rows)
    records = [json.loads(x) for x in (job / "journal.jsonl").read_text().splitlines()]
    parts = {r["part"] for r in records if r["event"] == "part"}
    out.parts = len(parts)
    collected = {
        r["batch_id"]
        for r in records
        if r["event"] == "submitted"
        and any(c["event"] == "collected" and c["part"] == r["part"] for c in records)
    }
    out.settled = sum(1 for r in records if r["event"] == "settled")
    backend = server.batches
    out.created = backend.created
    with backend.lock:
        batches = list(backend.batches.values())
        out.files_left = len(backend.files)
    out.orphans = [b.id for b in batches if not _among(b.id, collected) and b.cancelled_at is None]
    out.spent = anyio.run(FileStore(limits).spent, GLOBAL_BUDGET)
