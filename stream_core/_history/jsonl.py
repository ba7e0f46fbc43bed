"""History as append-only JSONL: one message per line.

A record of a registered role (`CustomMessage`: a compaction summary, a shell command the
user ran, ...) loads as its class and is written back with its unknown fields, like the
built-in messages. A record we don't understand (a role from a newer version or nobody
registered, a harness's own bookkeeping line) is kept as a plain dict and written back
unchanged, and so is a block of a type we don't
know inside a known message (`UnknownContent`), so no tool in a pipeline loses data it
doesn't know about. Files written by `dump_messages` round-trip byte for byte.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import IO, Any, TypeAlias

from pydantic import BaseModel, ValidationError

from .._checks import clip
from .._types import (
    KEEP_UNKNOWN_BLOCKS,
    MESSAGE_ADAPTER,
    Message,
    ModelMessage,
    expand_messages,
    registered_role,
)
from . import roles  # noqa: F401 - registers the ready-made roles before any record is read

__all__ = [
    "HistoryFormatError",
    "Record",
    "dump_messages",
    "load_messages",
    "messages_only",
    "model_messages",
]

Record: TypeAlias = Message | dict[str, Any]
"""A validated message (built-in or of a registered role), or a record with an unknown (or
no) role kept as loaded."""

_KNOWN_ROLES = frozenset({"user", "assistant", "tool_result"})


class HistoryFormatError(ValueError):
    """A history line that is not JSON, or a known message that fails validation."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        """1-based line number in the file."""


def _encode(record: Record) -> str:
    if isinstance(record, BaseModel):
        data: Any = record.model_dump(mode="json")
    elif isinstance(record, dict):
        data = record
    else:
        raise TypeError(f"expected a message model or a dict, got {type(record).__name__}")
    # allow_nan=False: `NaN` and `Infinity` are not JSON; no line we write is unreadable.
    line = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (e.g. from a `\ud800` escape or surrogateescape'd tool output) can't
        # be written as UTF-8; escaping the line keeps the history saveable, and it reloads
        # to the same string and re-dumps the same way.
        line = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return line


def _encode_checked(record: Record, index: int) -> str:
    try:
        return _encode(record)
    except (ValueError, RecursionError) as exc:
        why = (
            "it holds NaN or an infinite number, which JSON cannot hold"
            if isinstance(exc, ValueError) and "Out of range float" in str(exc)
            else f"it cannot be written as JSON ({type(exc).__name__}: {str(exc)[:100]})"
        )
        raise ValueError(f"record {index}: {why}; nothing was written") from None


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (a short write is continued, never lost)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def ends_cut(fd: int) -> bool:
    """The file open as `fd` (for reading) does not end in a newline: a writer was killed
    mid-line, or the file was edited by hand."""
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    if hasattr(os, "pread"):
        return os.pread(fd, 1, size - 1) != b"\n"
    os.lseek(fd, size - 1, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, 1) != b"\n"  # pragma: no cover


def append_line(fd: int, line: bytes) -> None:
    """Append one JSONL record (`line`, its newline included) to the file open as `fd`
    (`O_APPEND`, readable): a last line that was cut is ended first, so this record never
    joins it and is lost with it; written whole. Shared by the append-only files of the
    package (a batch job's journal and results, `stream_core.runs.ResultLog`); a writer
    that shares a file with others holds its own lock around the call."""
    write_all(fd, b"\n" + line if ends_cut(fd) else line)


def _missing_final_newline(path: str | os.PathLike[str]) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return False
    try:
        return ends_cut(fd)
    finally:
        os.close(fd)


def dump_messages(
    records: Iterable[Record],
    file: str | os.PathLike[str] | IO[str],
    *,
    append: bool = False,
) -> None:
    """Write one compact JSON object per line (UTF-8, non-ASCII kept as is).

    Models are written as `model_dump(mode="json")`; dict records exactly as loaded (same
    key order and values). Given a path, the file is created or truncated, or with
    `append=True` extended; given an open text stream, lines are written to it as is and
    `append` is ignored (the stream's own mode decides).
    """
    # Encoded first, written after: a record that cannot be written leaves the file as it
    # was, rather than cut after the records before it.
    lines = [_encode_checked(r, i) + "\n" for i, r in enumerate(records)]
    if isinstance(file, (str, os.PathLike)):
        # Appending after a hand-edited last line without "\n" would glue two records.
        lead = "\n" if append and _missing_final_newline(file) else ""
        # newline="\n": JSONL uses "\n" on every platform.
        with open(file, "a" if append else "w", encoding="utf-8", newline="\n") as f:
            f.write(lead)
            f.writelines(lines)
    else:
        file.writelines(lines)


def _error_path(error: ValidationError, role: str) -> str:
    details = error.errors(include_url=False)
    parts = []
    for detail in details[:3]:
        loc = list(detail["loc"])
        if loc and loc[0] == role:  # the discriminator tag MESSAGE_ADAPTER adds first
            loc = loc[1:]
        where = ".".join(str(p) for p in loc) or "<record>"
        parts.append(f"{where}: {detail['msg']}")
    more = f" (and {len(details) - 3} more)" if len(details) > 3 else ""
    return "; ".join(parts) + more


class _NotFinite(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)  # NaN, Infinity, -Infinity: not JSON


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(clip(text, 40))
    return value


def _decode(line: str, lineno: int) -> Record:
    try:
        data = json.loads(line, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise HistoryFormatError(lineno, f"not valid JSON ({e.msg} at column {e.colno})") from e
    except _NotFinite as e:
        raise HistoryFormatError(
            lineno, f"holds {e.args[0]}, a number no JSON tool can store or write back"
        ) from None
    except RecursionError:
        raise HistoryFormatError(lineno, "nested too deeply to read") from None
    except ValueError as e:
        why = str(e)[:120]
        if "4300 digits" in why:
            why = "an integer of more than 4,300 digits, which Python refuses to read"
        raise HistoryFormatError(lineno, f"cannot be read: {why}") from None
    if not isinstance(data, dict):
        raise HistoryFormatError(lineno, f"expected a JSON object, got {type(data).__name__}")
    role = data.get("role")
    custom = registered_role(role)
    if not isinstance(role, str) or (role not in _KNOWN_ROLES and custom is None):
        return data
    try:
        if custom is not None:
            return custom.model_validate(data, context=KEEP_UNKNOWN_BLOCKS)
        return MESSAGE_ADAPTER.validate_python(data, context=KEEP_UNKNOWN_BLOCKS)
    except ValidationError as e:
        raise HistoryFormatError(lineno, f"invalid {role} message: {_error_path(e, role)}") from e


def load_messages(file: str | os.PathLike[str] | IO[str]) -> list[Record]:
    """Read a JSONL history: user/assistant/tool_result records and those of a registered
    role (`register_message_role`, at the time of loading) become models, any other record
    (unknown or no role) stays a plain dict. Blank lines are skipped.

    Raises `HistoryFormatError` (a `ValueError`) naming the line number for a line that is
    not a JSON object, and also the field path for a known message that fails validation.
    """
    if isinstance(file, (str, os.PathLike)):
        # utf-8-sig: tolerate a BOM from an editor; dump_messages never writes one.
        with open(file, encoding="utf-8-sig") as f:
            return _load_lines(f)
    return _load_lines(file)


def _load_lines(lines: Iterable[str]) -> list[Record]:
    # Iterate the stream, never `str.splitlines()`: that also splits on U+2028 and friends,
    # which JSON leaves unescaped inside strings.
    return [_decode(line, n) for n, line in enumerate(lines, 1) if line.strip()]


def messages_only(records: Iterable[Record]) -> list[Message]:
    """The messages, dropping the records of unknown roles: what `Context(messages=...)`
    takes, and what a harness continues and saves again. Records of registered roles are
    kept as they are (they are sent as their conversion: see `model_messages`)."""
    return [r for r in records if not isinstance(r, dict)]


def model_messages(records: Iterable[Record]) -> list[ModelMessage]:
    """What the model reads of a history: records of unknown roles dropped, each record of
    a registered role replaced by its `to_messages()`. Every provider sends this (after its
    own handoff preparation: another vendor's thinking as text, tool-call ids, repair)."""
    return expand_messages(messages_only(records))
