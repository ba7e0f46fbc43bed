"""A JSONL log of results keyed by the caller's id: written one line per result as it
arrives, read back tolerant of a line a killed process cut, and the set of ids done.

One row a line: `{"id", "outcome", "kind", "provider", "model", "usd", "at", <extra>...,
"message"}`; `message` is the `AssistantMessage` as `model_dump(mode="json")` gives it
(content, usage with its cost, error with its kind). A line is one `write()` to a file
opened with `O_APPEND`, under an advisory lock (`flock`) where the system has one, and
starts with a newline when the file's last line was cut, so a line a killed process left
half-written stands alone and every later row is whole.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from stream_core import KEEP_UNKNOWN_BLOCKS, AssistantMessage, ErrorKind
from stream_core._history.jsonl import append_line

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: O_APPEND alone
    fcntl = None  # type: ignore[assignment]

__all__ = ["ResultLog", "ResultRow", "RowId"]

RowId = str | int
"""A caller's id for one request: a string (a batch's `custom_id`, a prompt's key) or an
integer (an index). `"1"` and `1` are different ids."""

_RESERVED = frozenset({"id", "outcome", "kind", "provider", "model", "usd", "at", "message"})
_START = b'{"id":'
_KINDS = frozenset(get_args(ErrorKind))
SYNC_EVERY = 1.0
"""Default seconds between `fsync`s of a `ResultLog` (see `ResultLog`)."""


@dataclass(frozen=True)
class ResultRow:
    """One recorded result: the caller's `id`, the `message` (revalidated), `outcome`
    (`"ok"`, or `"error"` with the error's `kind`), the model that answered, its cost in
    USD (None: unpriced), the time it was written (`at`, Unix seconds) and the caller's
    own fields (`extra`, as written)."""

    id: RowId
    message: AssistantMessage
    outcome: str
    kind: str | None
    provider: str
    model: str
    usd: float | None
    at: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def batch(self) -> bool:
        """Priced at a vendor's batch price, as the row says: written with `batch=True`,
        or with the `batch_id` a batch result carries."""
        flag = self.extra.get("batch")
        return flag is True or bool(self.extra.get("batch_id"))


def _check_id(value: object) -> RowId:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a result's id is a str or an int, not {type(value).__name__}")
    return value


def _dumps(data: Any) -> str:
    line = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, it reads back the same
        line = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return line


def encode_row(row_id: RowId, message: AssistantMessage, extra: Mapping[str, Any]) -> bytes:
    """The row's line, newline included. Raises `ValueError`/`TypeError` (nothing written)
    for an extra field named like a row's own or one JSON cannot hold."""
    clash = sorted(_RESERVED.intersection(extra))
    if clash:
        raise ValueError(f"extra field(s) {', '.join(clash)} would replace the row's own")
    if not isinstance(message, AssistantMessage):
        raise TypeError(f"expected an AssistantMessage, got {type(message).__name__}")
    cost = message.usage.cost
    data: dict[str, Any] = {
        "id": _check_id(row_id),
        "outcome": "ok" if message.error is None else "error",
        "kind": None if message.error is None else message.error.kind,
        "provider": message.provider,
        "model": message.model,
        "usd": None if cost is None else cost.total,
        "at": time.time(),
        **extra,
        "message": message.model_dump(mode="json"),
    }
    try:
        return (_dumps(data) + "\n").encode("utf-8")
    except ValueError as exc:
        raise ValueError(f"result {row_id!r} cannot be written as JSON: {exc}") from None


# --- reading ------------------------------------------------------------------------------


class _NotJSON(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJSON(name)


def _object(raw: bytes) -> dict[str, Any] | None:
    """The JSON object `raw` holds, else None (a cut line, junk)."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, _NotJSON, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _salvage(raw: bytes, lineno: int) -> list[ResultRow]:
    """The row of a line that is not one: a row glued after a cut one (a writer without
    the lock) starts at a later `{"id":`. Only a whole row counts: the cut part may hold
    `{"id":` too (a tool call's arguments), never a whole row."""
    start = raw.find(_START, 1)
    while start != -1:
        data = _object(raw[start:])
        if data is not None:
            try:
                return [_row(data, lineno)]
            except ValueError:
                pass
        start = raw.find(_START, start + 1)
    return []


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _row(data: dict[str, Any], lineno: int) -> ResultRow:
    try:
        row_id = _check_id(data.get("id"))
        message = AssistantMessage.model_validate(data.get("message"), context=KEEP_UNKNOWN_BLOCKS)
    except (TypeError, ValueError) as exc:
        why = str(exc).splitlines()[0][:200]
        raise ValueError(f"line {lineno}: not a result row ({why})") from None
    kind = message.error.kind if message.error is not None else None
    extra = {k: v for k, v in data.items() if k not in _RESERVED}
    cost = message.usage.cost
    return ResultRow(
        id=row_id,
        message=message,
        outcome="ok" if kind is None else "error",
        kind=kind,
        provider=message.provider,
        model=message.model,
        usd=None if cost is None else cost.total,
        at=_number(data.get("at")) or 0.0,
        extra=extra,
    )


def parse_lines(chunk: bytes, first_line: int = 1) -> tuple[list[ResultRow], int]:
    """The rows of the lines in `chunk`, and how many lines were cut (not one object).
    Outcome, kind, provider, model and cost are read from the message, the one source."""
    rows: list[ResultRow] = []
    cut = 0
    for n, raw in enumerate(chunk.split(b"\n"), first_line):
        if not raw.strip():
            continue
        data = _object(raw)
        if data is not None:
            rows.append(_row(data, n))
            continue
        cut += 1
        rows.extend(_salvage(raw, n))
    return rows, cut


# --- the log ------------------------------------------------------------------------------


class ResultLog:
    """Results keyed by the caller's id, one JSON line each, written as each arrives.

        log = ResultLog("results.jsonl")
        for q in log.pending(ids):
            message = await complete(model, contexts[q], options)
            log.write(q, message, prompt_set="v2")

    Reading the file on opening gives `done`: the ids a rerun skips. A successful result
    counts as done; a failed one (its message's `error.kind`) counts only if its kind is
    in `done_kinds` (default none: a rerun tries every failure again; `done_kinds="all"`
    takes every recorded row as done, `{"refusal", "content_filter"}` keeps answers a
    retry would not change). An id with rows of both kinds is done if any row is.

    Every line is handed to the system in one `write()` call (`O_APPEND`, under an
    advisory `flock` where there is one), so a process killed with `kill -9` loses at
    most the line it was writing, and several processes (of one host, on a local file
    system) may append to one file. The file is `fsync`ed at most every `sync_every`
    seconds (0: after every line) and on `close()`: the kernel already holds each written
    line, so this bounds what a power cut, not a killed process, can lose.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        done_kinds: Iterable[ErrorKind] | Literal["all"] = (),
        sync_every: float = SYNC_EVERY,
    ) -> None:
        kinds: frozenset[str] | None = None
        if done_kinds != "all":
            if isinstance(done_kinds, str):
                raise ValueError(f'done_kinds is "all" or a set of error kinds, not {done_kinds!r}')
            kinds = frozenset(done_kinds)
            unknown = sorted(kinds - _KINDS)
            if unknown:
                raise ValueError(f"done_kinds: not error kinds: {', '.join(map(repr, unknown))}")
        if isinstance(sync_every, bool) or not (
            isinstance(sync_every, (int, float)) and 0 <= sync_every < math.inf
        ):
            raise ValueError(f"sync_every must be seconds, 0 or more, not {sync_every!r}")
        self.path = os.fspath(path)
        self.done_kinds = kinds
        """The error kinds whose rows count as done (None: every kind)."""
        self.sync_every = float(sync_every)
        self.cut_lines = 0
        """Lines read that were cut (a writer killed mid-line): skipped, never an error."""
        self._done: set[RowId] = set()
        self._failed: dict[RowId, str] = {}
        self._offset = 0
        self._lines = 0
        self._fd: int | None = None
        self._synced = 0.0
        self.refresh()

    # reading

    @staticmethod
    def read(path: str | os.PathLike[str]) -> Iterator[ResultRow]:
        """Every row of the file, in the order written; a cut line (the last one, or one a
        killed worker left before others appended) is skipped. Raises `ValueError` naming
        the line for a whole JSON line that is not a row (no id, an invalid message)."""
        with open(path, "rb") as f:
            lineno = 1
            tail = b""
            while block := f.read(1 << 20):
                data = tail + block
                end = data.rfind(b"\n") + 1
                rows, _ = parse_lines(data[:end], lineno)
                lineno += data.count(b"\n", 0, end)
                tail = data[end:]
                yield from rows
            rows, _ = parse_lines(tail, lineno)
            yield from rows

    def refresh(self) -> None:
        """Read the rows appended since (by this process or any other): `done` and
        `failed` then include them. A last line still being written is left for later."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        tail = b""
        with f:
            f.seek(self._offset)
            while block := f.read(1 << 20):
                data = tail + block
                end = data.rfind(b"\n") + 1
                rows, cut = parse_lines(data[:end], self._lines + 1)
                self._lines += data.count(b"\n", 0, end)
                self._offset += end
                self.cut_lines += cut
                for row in rows:
                    self._note(row.id, row.kind)
                tail = data[end:]
        whole = _object(tail) if tail.strip() else None
        if whole is not None:
            # Whole but for its newline (cut by hand: a writer's one write() holds both):
            # counted now, and the next writer starts a line of its own after it.
            row = _row(whole, self._lines + 1)
            self._offset += len(tail)
            self._note(row.id, row.kind)

    def _note(self, row_id: RowId, kind: str | None) -> None:
        if kind is None or self.done_kinds is None or kind in self.done_kinds:
            self._done.add(row_id)
            self._failed.pop(row_id, None)
        elif row_id not in self._done:
            self._failed[row_id] = kind

    @property
    def done(self) -> frozenset[RowId]:
        """The ids recorded as done (see `done_kinds`): read on opening and `refresh()`,
        and every id this log wrote since."""
        return frozenset(self._done)

    @property
    def failed(self) -> dict[RowId, str]:
        """The ids recorded only as failures not counted done, with the latest kind."""
        return dict(self._failed)

    def pending(self, ids: Iterable[RowId]) -> list[RowId]:
        """`ids` not done, in their order (repeats kept)."""
        done = self._done
        return [i for i in ids if i not in done]

    # writing

    def write(self, row_id: RowId, message: AssistantMessage, **extra: Any) -> None:
        """Append `message` as the row of `row_id`, with the caller's JSON `extra` fields
        (`batch_id=...`, `batch=True` for a result priced at a batch price, a prompt's
        tags). Written whole before this returns, or (`ValueError`/`TypeError` for a row
        JSON cannot hold, `OSError` from the system) not at all."""
        line = encode_row(row_id, message, extra)
        fd = self._open()
        locked = _lock(fd)
        try:
            append_line(fd, line)
        finally:
            if locked:
                _unlock(fd)
        now = time.monotonic()
        if now - self._synced >= self.sync_every:
            os.fsync(fd)
            self._synced = now
        self._note(row_id, None if message.error is None else message.error.kind)

    def _open(self) -> int:
        if self._fd is None:
            # Read too: the last byte says whether a killed writer cut the last line.
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
            self._fd = os.open(self.path, flags, 0o666)
            self._synced = time.monotonic()
        return self._fd

    def close(self) -> None:
        """`fsync` and close the file (writing again opens it again)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def __enter__(self) -> ResultLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def __repr__(self) -> str:
        return f"ResultLog({self.path!r}, done={len(self._done)}, failed={len(self._failed)})"


def _lock(fd: int) -> bool:
    if fcntl is None:  # pragma: no cover
        return False
    fcntl.flock(fd, fcntl.LOCK_EX)
    return True


def _unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
