"""What the two Google batch codecs share (`_gemini_batch`: Gemini API batch mode,
`_vertex_batch`: Vertex AI batch prediction): their custom ids kept compactly in the
journal, the vendor's numbers and times read from JSON of any shape, JSON Lines read
without ever raising, and the `Keys` ledger that turns result lines into one `RawResult`
per request: by the key a line carries, else by the request it echoes, else by its order
(Gemini writes its results in input order), and at the end of an ended batch, one for each
request no line answered (expired, cancelled, or a protocol error: never a lost row).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Iterator
from typing import Any

from stream_core.provider import BatchCounts, BatchSession, BatchState, Outcome, RawResult

from ._batch_lines import rfc3339, unix_time
from ._gemini_whole import read_error

__all__ = [
    "Keys",
    "clip",
    "count",
    "digest",
    "jsonl",
    "pack_keys",
    "rfc3339",
    "safe_path",
    "timestamp",
    "unpack_keys",
]

STATES: dict[str, BatchState] = {
    "BATCH_STATE_PENDING": "submitted",
    "BATCH_STATE_RUNNING": "running",
    "BATCH_STATE_SUCCEEDED": "ended",
    "BATCH_STATE_FAILED": "failed",
    "BATCH_STATE_CANCELLED": "ended",
    "BATCH_STATE_EXPIRED": "ended",
    "JOB_STATE_QUEUED": "submitted",
    "JOB_STATE_PENDING": "submitted",
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_PAUSED": "running",
    "JOB_STATE_UPDATING": "running",
    "JOB_STATE_SUCCEEDED": "ended",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "ended",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_CANCELLED": "ended",
    "JOB_STATE_EXPIRED": "ended",
    "BATCH_STATE_UNSPECIFIED": "submitted",
    "JOB_STATE_UNSPECIFIED": "submitted",
}
"""A batch's state, Gemini API (`BATCH_STATE_*`) and Vertex AI (`JOB_STATE_*`, which the
Gemini API has also answered with) -> ours. A word not here reads as `running`: polled on."""

ENDED_AS: dict[str, Outcome] = {
    "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_EXPIRED": "expired",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}
"""An ended state whose requests without a result line ended so (else: errored)."""


def state_word(state: BatchState, ended_as: Outcome | None, prefix: str) -> str:
    """The vendor's word for our state (`prefix` `BATCH_STATE_` or `JOB_STATE_`): the
    fake vendor's."""
    if ended_as is not None:
        return next(w for w, o in ENDED_AS.items() if o == ended_as and w.startswith(prefix))
    return next(w for w, s in STATES.items() if s == state and w.startswith(prefix))


MAX_KEYS = 10_000_000
"""More custom ids than any part holds: a journal entry claiming more is not read."""

_TRAILING = re.compile(r"(.*?)(0|[1-9][0-9]{0,17})")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def clip(value: object, n: int = 300) -> str:
    """A vendor value for an error message: short, and on one line."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def safe_path(value: object, prefix: str) -> str | None:
    """A vendor-given resource name (`batches/x`, `files/x`) that can go in a URL path as
    it is: `prefix` and one plain segment, else None (a name with `/`, `?`, `..`, or of
    another type would move the request)."""
    if not isinstance(value, str) or not value.startswith(prefix):
        return None
    rest = value[len(prefix) :]
    if not _SEGMENT.fullmatch(rest) or rest in (".", ".."):
        return None
    return value


# --- custom ids in the journal ---------------------------------------------------------


def pack_keys(keys: list[str]) -> dict[str, Any]:
    """A part's custom ids for `session.record`: `{prefix, start, count}` when they are
    `<prefix><n>` for consecutive n (the engine's `<tag>_<n>`), else the list."""
    if keys:
        found = _TRAILING.fullmatch(keys[0])
        if found is not None:
            prefix, start = found.group(1), int(found.group(2))
            if all(k == f"{prefix}{start + i}" for i, k in enumerate(keys)):
                return {"prefix": prefix, "start": start, "count": len(keys)}
    return {"list": list(keys)}


def unpack_keys(packed: object) -> list[str] | None:
    """The custom ids `pack_keys` recorded (None: nothing readable was recorded)."""
    if not isinstance(packed, dict):
        return None
    listed = packed.get("list")
    if isinstance(listed, list):
        keys = [k for k in listed if isinstance(k, str)]
        return keys if len(keys) == len(listed) else None
    prefix, start, n = packed.get("prefix"), packed.get("start"), packed.get("count")
    if not isinstance(prefix, str) or type(start) is not int or type(n) is not int:
        return None
    if not 0 <= n <= MAX_KEYS or start < 0:
        return None
    return [f"{prefix}{start + i}" for i in range(n)]


# --- numbers and times ---------------------------------------------------------------------


def count(value: object) -> int:
    """An int64 count as Google's JSON sends it (a string of digits, or a number); 0 for
    anything else, never more than `MAX_KEYS`."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        return min(int(value), MAX_KEYS)
    if type(value) is int and value > 0:
        return min(value, MAX_KEYS)
    return 0


def timestamp(value: object) -> float | None:
    """Unix time of an RFC 3339 timestamp (`2025-07-01T10:00:00.123456789Z`), else None
    (Google's times are strings; a number is not one)."""
    return unix_time(value) if isinstance(value, str) else None


# --- lines -------------------------------------------------------------------------------


def jsonl(data: bytes) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, value, None) for each non-empty line of a JSON Lines body, or (n,
    None, why) for one that is not JSON: never raises."""
    n = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            yield (
                n,
                None,
                f"not JSON ({type(exc).__name__}): {clip(raw[:200].decode('utf-8', 'replace'))}",
            )
        else:
            yield n, value, None
        n += 1


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {_camel(str(k)): _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def digest(request: Any) -> str | None:
    """A request's fingerprint, the same for the line sent and the vendor's echo of it (keys
    in any order, `snake_case` or `camelCase`); None when it cannot be serialized."""
    try:
        text = json.dumps(_canonical(request), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def result_of(custom_id: str, response: Any, error: Any) -> RawResult:
    """One answered line: its error (any shape, read by `read_error`) or its response."""
    if error is not None and error != {} and error != "":
        kind, message, status = read_error(error)
        return RawResult(custom_id, "errored", kind=kind, message=message, status=status)
    if isinstance(response, dict):
        return RawResult(custom_id, "succeeded", body=response)
    return protocol(custom_id, f"a result with neither a response nor an error: {clip(response)}")


def protocol(custom_id: str, message: str) -> RawResult:
    return RawResult(custom_id, "errored", kind="protocol", message=message[:2000])


class Keys:
    """The part's custom ids, and which of them a line answered (see the module docstring).
    `known` is None when nothing was recorded (a line's own key is then taken as it is)."""

    def __init__(self, known: list[str] | None) -> None:
        self.known = known
        self.members = set(known) if known is not None else None
        self.answered: set[str] = set()
        self.by_echo: dict[str, deque[str]] | None = None

    def echoes(self, lines: list[tuple[str, Any]]) -> None:
        """Learn the requests sent (custom id, request), for lines with no key."""
        found: dict[str, deque[str]] = {}
        for key, request in lines:
            fingerprint = digest(request)
            if fingerprint is not None:
                found.setdefault(fingerprint, deque()).append(key)
        self.by_echo = found

    def owns(self, key: object) -> bool:
        """Whether `key` is one of the part's custom ids (any string, when none is known)."""
        return isinstance(key, str) and bool(key) and (self.members is None or key in self.members)

    def take(self, key: object, n: int | None = None, echo: Any = None) -> str | None:
        """The custom id a line answers: its own `key` when it is one of ours (or nothing
        was recorded), else the request it echoes, else its place `n` (Gemini writes in
        input order); "" when none tells; None when that id was answered already (a
        repeated line is not a second result)."""
        if isinstance(key, str) and self.owns(key):
            return self._claim(key)
        if echo is not None and self.by_echo is not None:
            waiting = self.by_echo.get(digest(echo) or "")
            while waiting:
                candidate = waiting.popleft()
                if candidate not in self.answered:
                    return self._claim(candidate)
        if n is not None and self.known is not None and 0 <= n < len(self.known):
            if key is None or key == "":
                return self._claim(self.known[n])
        return ""

    def _claim(self, key: str) -> str | None:
        if key in self.answered:
            return None
        self.answered.add(key)
        return key

    def unread(self, line: str, why: str) -> RawResult:
        """A line no request could be found for: kept, as a protocol error with no id."""
        return protocol("", f"{why}: {clip(line)}")

    def missing(
        self, state: BatchState, vendor_state: str, ended_as: Outcome | None
    ) -> Iterator[RawResult]:
        """One result for each request no line answered, once the batch has ended: its
        outcome is the batch's (`ended_as`: expired, cancelled), else a protocol error."""
        if self.known is None or state != "ended":
            return
        for key in self.known:
            if key in self.answered:
                continue
            self.answered.add(key)
            if ended_as in ("expired", "cancelled"):
                text = f"the batch ended {vendor_state} before this request ran"
                yield RawResult(
                    key,
                    ended_as,
                    kind="expired" if ended_as == "expired" else "aborted",
                    message=text,
                )
            else:
                yield protocol(key, f"the batch ended {vendor_state} with no result line for it")


def counts_of(total: int, succeeded: int, failed: int, ended_as: Outcome | None) -> BatchCounts:
    """Counts from the vendor's: what neither succeeded nor failed in a batch that ended
    expired or cancelled is counted so."""
    total = max(total, succeeded + failed)
    rest = total - succeeded - failed
    return BatchCounts(
        total=total,
        succeeded=succeeded,
        errored=failed,
        expired=rest if ended_as == "expired" else 0,
        cancelled=rest if ended_as == "cancelled" else 0,
    )


def recorded_keys(session: BatchSession) -> list[str] | None:
    return unpack_keys(session.recorded.get("keys"))
