"""A job on disk: what was asked, what each step made, and every result as it arrived.

One directory per job under the store (`<store>/<name>/`, mode 0700, files 0600):

- `journal.jsonl`: append-only records, each written and fsync'ed before the step it
  precedes goes on: the job; each part (before the vendor is asked for it, with its tag,
  its model and its budget hold); each step a codec records (a file uploaded, an object
  put); the vendor's batch id once it accepted the part; collection, settlement, cleanup.
- `requests.jsonl`: each request's custom id, vendor-side id, part, and what reading its
  answer needs (the options that bound and price it; never a key).
- `part-<n>.jsonl`: the exact lines of part n, written before anything is uploaded.
- `results.jsonl`: one line per result, appended and flushed as each arrives; its ids are
  the job's done-set, so a collection that is killed and run again writes each once.

Readers tolerate a last line cut by a kill. A lock file serializes the processes that
submit or collect one job (`fcntl.flock`), so four workers may run the same script.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.lowlevel import RunVar

from stream_core._history.jsonl import append_line, write_all

__all__ = ["JobLock", "Journal", "check_name", "read_lines"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"name: {name!r} is not a job name (1-100 characters of letters, digits, "
            "'.', '_' or '-', starting with a letter or digit)"
        )
    return name


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Each JSON object line of `path`; a line that does not parse (the last one, cut by a
    kill) is skipped, as is anything that is not an object."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def dumps(obj: Any) -> bytes:
    """One JSON line, UTF-8. A string holding half a surrogate pair (a vendor's JSON may
    escape one: `"\\ud83d"`) has no UTF-8 form: that line is written with escapes, so it
    reads back as it was and the file stays UTF-8."""
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _append(path: Path, line: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        # A last line cut by a kill is ended first: this one (a result row, a `submitted`
        # record) must not join it and be lost with it.
        append_line(fd, line)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """One job's directory (see the module docstring)."""

    def __init__(self, store: str | os.PathLike[str], name: str) -> None:
        self.name = check_name(name)
        self.root = Path(store)
        self.dir = self.root / name

    @property
    def exists(self) -> bool:
        """Whether the job is on disk (`PermissionError` when its directory is not this
        user's own: see `check_private`)."""
        if self.dir.is_file():
            return False  # a file of the caller's own beside the jobs, no job
        self.check_private()
        return (self.dir / "journal.jsonl").is_file()

    def create_dir(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self.dir.mkdir(mode=0o700)
        except FileExistsError:
            pass
        self.check_private()

    def check_private(self) -> None:
        """The job's directory, if there is one, is this user's own, and only theirs: not
        a symlink nor another user's (in a store others can write, either would hand them
        the journal, and the part files this user's key would send); its mode made 0700."""
        try:
            st = os.lstat(self.dir)
        except FileNotFoundError:
            return
        where = f"batch job {self.name!r}: {str(self.dir)!r}"
        if stat.S_ISLNK(st.st_mode):
            raise PermissionError(f"{where} is a symlink; a job's directory must be its own")
        if not stat.S_ISDIR(st.st_mode):
            raise PermissionError(f"{where} is not a directory")
        if st.st_uid != os.geteuid():
            raise PermissionError(
                f"{where} belongs to user id {st.st_uid}, not this user ({os.geteuid()})"
            )
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(self.dir, 0o700)

    @contextmanager
    def locked(self, wait: bool = True) -> Iterator[bool]:
        """Hold the job's lock (other processes working on this job wait); with
        `wait=False`, False at once (nothing held) when another holds it."""
        import fcntl

        self.create_dir()
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # --- the journal -----------------------------------------------------------------------

    def record(self, event: str, **fields: Any) -> None:
        """Append one record and fsync it: on disk before the caller goes on."""
        entry = {"event": event, "at": time.time(), **fields}
        _append(self.dir / "journal.jsonl", dumps(entry), sync=True)

    def write_head(self, records: list[tuple[str, dict[str, Any]]]) -> None:
        """A new job's first records, written whole (renamed into place) or not at all."""
        now = time.time()
        self._write_whole(
            "journal.jsonl", b"".join(dumps({"event": e, "at": now, **f}) for e, f in records)
        )

    def records(self) -> list[dict[str, Any]]:
        return list(read_lines(self.dir / "journal.jsonl"))

    # --- requests and parts ---------------------------------------------------------------

    def write_requests(self, rows: list[dict[str, Any]]) -> None:
        self._write_whole("requests.jsonl", b"".join(dumps(r) for r in rows))

    def requests(self) -> list[dict[str, Any]]:
        return list(read_lines(self.dir / "requests.jsonl"))

    def write_part(self, n: int, data: bytes) -> None:
        self._write_whole(f"part-{n}.jsonl", data)

    def part_bytes(self, n: int) -> bytes:
        return (self.dir / f"part-{n}.jsonl").read_bytes()

    def _write_whole(self, name: str, data: bytes) -> None:
        """Written under a temporary name, fsync'ed and renamed: whole or absent."""
        tmp = self.dir / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / name)

    # --- results ---------------------------------------------------------------------------

    def done(self) -> set[str]:
        """The custom ids with a result on disk."""
        return {
            r["id"] for r in read_lines(self.dir / "results.jsonl") if isinstance(r.get("id"), str)
        }

    def write_result(self, row: dict[str, Any], *, sync: bool) -> None:
        _append(self.dir / "results.jsonl", dumps(row), sync=sync)

    def sync_results(self) -> None:
        """Flush results.jsonl to disk (rows are appended unsynced, one part's at a time)."""
        try:
            fd = os.open(self.dir / "results.jsonl", os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def results(self) -> Iterator[dict[str, Any]]:
        return read_lines(self.dir / "results.jsonl")


_LOCAL: RunVar[dict[str, anyio.Lock]] = RunVar("stream_core_batch_job_locks")


class JobLock:
    """The job's lock, taken in a worker thread so the event loop never blocks on it.

    The tasks of one event loop first queue on a lock of their own (cancellable, no
    thread), so one thread at most per job waits on the file lock: 40 tasks of one
    process waiting in threads would hold every worker thread anyio lends, and the task
    holding the job, needing one (a connection), would wait for them forever."""

    def __init__(self, journal: Journal, *, wait: bool = True) -> None:
        self._journal = journal
        self._wait = wait
        self._cm: Any = None
        self._local: anyio.Lock | None = None

    async def __aenter__(self) -> bool:
        """True: held; False (`wait=False` only): another holds it."""
        try:
            locks = _LOCAL.get()
        except LookupError:
            locks = {}
            _LOCAL.set(locks)
        local = locks.setdefault(os.path.abspath(self._journal.dir), anyio.Lock())
        if not self._wait:
            try:
                local.acquire_nowait()
            except anyio.WouldBlock:
                return False
        else:
            await local.acquire()
        try:
            self._cm = self._journal.locked(self._wait)
            if not self._wait:
                held = bool(self._cm.__enter__())
            else:
                held = bool(await anyio.to_thread.run_sync(self._cm.__enter__))
        except BaseException:
            local.release()
            raise
        if not held:
            local.release()
        else:
            self._local = local
        return held

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self._cm is not None:  # None: a lock not waited for, held by a task here
                self._cm.__exit__(None, None, None)
        finally:
            if self._local is not None:
                self._local.release()
                self._local = None
