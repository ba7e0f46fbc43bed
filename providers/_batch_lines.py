"""Reading a vendor's batch files and objects, which are untrusted bytes: JSONL result
lines, times, counts. Shared by the batch codecs of Anthropic and Mistral.

A result line that does not parse, or is not an object, or names no custom id, is never
dropped: what can be read of it (a custom id found in its text) becomes an `errored`
result of kind `protocol`; a line with no custom id at all cannot be matched to its
request, so it is counted (`Unreadable`) and logged by line number, and the request it was
for is given as `errored` (`protocol`) with the others that got no line: by the engine
(`stream_core.batch`), or by the codec where it can list the batch's ids (Mistral). Never
an exception: one would stop the rest of the batch from being collected.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from stream_core.provider import BatchHTTPError, RawResult

__all__ = [
    "MAX_COUNT",
    "Unreadable",
    "clip",
    "count",
    "is_json",
    "jsonl",
    "protocol_result",
    "rfc3339",
    "salvage_id",
    "text_of",
    "unix_time",
]

logger = logging.getLogger("stream_core")

MAX_COUNT = 10**12
"""The largest request count read as one (a bigger number is a vendor's junk: 0)."""

_TEXT_LIMIT = 2000
_ID_IN_TEXT = re.compile(r'"custom_id"\s*:\s*"([A-Za-z0-9_-]{1,64})"')


def clip(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_or_none(response: httpx.Response) -> Any:
    """The answer's JSON, of any type; None when it is not JSON (junk, or nested deeper
    than the parser goes)."""
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):
        return None


def json_body(response: httpx.Response, what: str) -> Any:
    """The answer's JSON, of any type; `BatchHTTPError` kind `protocol` when it is not
    JSON (junk, or nested deeper than the parser goes)."""
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):
        raise BatchHTTPError(
            "protocol", response.status_code, f"{what}: the answer is not JSON"
        ) from None


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The answer's JSON object; `BatchHTTPError` kind `protocol`, quoting the answer's
    start, when it is not one."""
    try:
        data = json.loads(response.content)
    except (ValueError, RecursionError):
        data = None
    if type(data) is not dict:
        said = clip(response.content.decode("utf-8", "replace"), 200)
        raise BatchHTTPError(
            "protocol", response.status_code, f"{what}: not a JSON object: {said!r}"
        )
    return data


def text_of(value: Any, limit: int = 200) -> str:
    """A vendor value, shown short in an error's words."""
    try:
        said = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        said = repr(type(value))
    return clip(said, limit)


_NOT_JSON: Any = object()
"""What `jsonl` gives for a line that is not JSON (`is_json` tells)."""


def jsonl(body: bytes) -> Iterator[tuple[int, Any, str]]:
    """(line number from 1, the parsed value (`is_json` false: not JSON), the line's text)
    for each non-blank line of a JSONL body."""
    text = body.decode("utf-8", "replace")
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            value = _NOT_JSON
        yield n, value, line


def is_json(value: Any) -> bool:
    return value is not _NOT_JSON


def salvage_id(text: str) -> str | None:
    """A custom id found in a line that cannot be read as a whole (cut, junk around it)."""
    found = _ID_IN_TEXT.search(text)
    return found.group(1) if found else None


def protocol_result(custom_id: str, n: int, why: str) -> RawResult:
    """An `errored` result of kind `protocol`: its line could not be read (`why`)."""
    return RawResult(custom_id, "errored", kind="protocol", message=clip(f"result line {n}: {why}"))


def count(value: Any) -> int:
    """A request count: a non-negative integer, anything else (a bool, a float, a string,
    a number past `MAX_COUNT`) 0."""
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    return 0


_MIN_TIME = 0.0
_MAX_TIME = 32503680000.0  # the year 3000


def unix_time(value: Any) -> float | None:
    """Unix seconds from a vendor's time: a number (seconds) or an RFC 3339 string (`Z`
    or `z`, any fraction: Google writes nanoseconds); None for anything else or out of
    range."""
    if type(value) in (int, float):
        t = float(value)
    elif isinstance(value, str) and 0 < len(value) <= 64:
        try:
            text = value.strip()
            if text[-1:] in ("Z", "z"):
                text = text[:-1] + "+00:00"
            stamp = datetime.fromisoformat(text)
        except ValueError:
            return None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        try:
            t = stamp.timestamp()
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    return t if math.isfinite(t) and _MIN_TIME <= t <= _MAX_TIME else None


def rfc3339(t: float) -> str:
    """Unix seconds as an RFC 3339 string in UTC, microseconds always written, as Anthropic
    and Google write theirs (`2024-09-24T18:37:24.100435Z`): the fake vendor's times."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Unreadable:
    """The result lines of a batch that named no custom id (see the module docstring)."""

    what: str
    lines: list[int] = field(default_factory=list)

    def add(self, n: int) -> None:
        self.lines.append(n)

    def read(
        self, data: bytes, read: Callable[[int, Any, str], RawResult | None]
    ) -> Iterator[RawResult]:
        """Each line of the JSONL `data` that `read` (line number, value, text) makes a
        result of; a line it cannot tie to a custom id (None) is noted here."""
        for n, value, text in jsonl(data):
            result = read(n, value, text)
            if result is None:
                self.add(n)
            else:
                yield result

    def words(self) -> str | None:
        """ "result line 3, 9 named no custom id", or None when every line named one."""
        if not self.lines:
            return None
        shown = ", ".join(str(n) for n in self.lines[:10])
        more = f" and {len(self.lines) - 10} more" if len(self.lines) > 10 else ""
        return f"result line {shown}{more} named no custom id"

    def report(self) -> None:
        """Log the lines, once every other line has been handed on."""
        said = self.words()
        if said is not None:
            logger.warning(
                "%s: %s; the requests they were for are errored (protocol)", self.what, said
            )
