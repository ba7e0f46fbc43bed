"""Collecting a part: its ended vendor batch's results read, each written to the job's
results.jsonl as it arrives (its ids the done-set, so a collection killed and run again
writes each once), then its budget hold settled to the exact cost and its files deleted.
Every request gets a row: a result, or an error saying why there is none."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, get_args

from stream_core import AssistantMessage, ErrorKind
from stream_core.provider import (
    BatchHTTPError,
    BatchStatus,
    BatchWire,
    Outcome,
    Plan,
    RawResult,
    failed_answer,
    read_whole,
)

from ._journal import JobLock, Journal
from ._plans import decode_plan
from ._session import HttpSession
from ._state import JobState, PartState
from ._types import BatchResult

if TYPE_CHECKING:
    from ._job import BatchJob

__all__ = ["clean", "collect_part", "fill_abandoned", "finish", "result_of", "write_abandoned"]

logger = logging.getLogger("stream_core")


async def collect_part(job: BatchJob, part: PartState) -> list[BatchResult]:
    """An ended part's results, each written as it is read, under the job's lock."""
    assert part.batch_id is not None
    codec = job._codec(part)
    session = job._session(part)
    found: list[BatchResult] = []
    try:
        try:
            status = await codec.status(session, part.batch_id)
        except BatchHTTPError:
            if job._collected_meanwhile(part):
                return found
            raise
        if status.state not in ("ended", "failed"):
            return found
        async with JobLock(job._journal):
            job.state = JobState.load(job._journal)
            asked, part = part.batch_id, job.state.parts[part.n]
            if part.collected or part.batch_id != asked:  # another worker moved it on
                return found
            if _refused(codec, status) and time.time() - part.at < codec.window_hours * 3600:
                await job._requeue(part)  # nothing ran: submitted again, no rows
                return found
            missing: list[str] = []
            async for result in read_part(job, codec, session, part, status, missing):
                found.append(result)
            job._journal.sync_results()  # on disk before the record that says they are
            kept = bool(missing)
            job._journal.record("collected", part=part.n, state=status.vendor_state, kept=kept)
            part.collected, part.kept = True, kept
            await job._settle(part)
            if kept:
                # Ended, yet some answers never came: the vendor's files are the only copy
                # of what it may have billed. Never deleted here.
                logger.warning(
                    "batch job %s: part %d (batch %s) ended without a result for %d requests "
                    "(%s); they are errors (protocol); the vendor's files are kept",
                    job.name, part.n, part.batch_id, len(missing), ", ".join(missing[:5]),
                )  # fmt: skip
            else:
                await clean(job, codec, session, part, status)
    finally:
        await session.aclose()
    return found


async def clean(
    job: BatchJob,
    codec: BatchWire,
    session: HttpSession,
    part: PartState,
    status: BatchStatus | None,
) -> None:
    if not job.settings.delete_files or codec.cleanup is None or part.cleaned:
        return
    job._cleaning.add(part.n)
    try:
        await codec.cleanup(session, status)
        job._journal.record("cleaned", part=part.n)
        part.cleaned = True
    except BatchHTTPError as exc:
        logger.warning("batch job %s: files of part %d not deleted: %s",
                       job.name, part.n, exc.message)  # fmt: skip


async def finish(job: BatchJob, part: PartState) -> None:
    """A part collected by a process killed before it settled the part's budget hold
    or deleted its files: both done now (each once; a failed delete is tried again by
    the next job object, not by every `collect` round)."""
    codec = job._codec(part)
    wanted = job.settings.delete_files and codec.cleanup is not None and not part.cleaned
    wanted = wanted and not part.kept
    wanted = wanted and part.n not in job._cleaning
    if (part.hold is None or part.settled) and not wanted:
        return
    async with JobLock(job._journal):
        job.state = JobState.load(job._journal)
        part = job.state.parts[part.n]
        await job._settle(part)
        if not wanted or part.cleaned:
            return
        session = job._session(part)
        try:
            status = None
            if part.batch_id is not None:
                try:
                    status = await codec.status(session, part.batch_id)
                except BatchHTTPError:
                    status = None  # gone: the files the part recorded are still known
            await clean(job, codec, session, part, status)
        finally:
            await session.aclose()


async def read_part(
    job: BatchJob,
    codec: BatchWire,
    session: HttpSession,
    part: PartState,
    status: BatchStatus,
    missing: list[str],
) -> AsyncIterator[BatchResult]:
    """Each result of the part not yet on disk, written; a request the vendor gave no line
    is an error row (its custom id added to `missing` when the batch ended rather than
    failed)."""
    by_vid = dict(part.ids)
    done = {
        r["id"]
        for r in job._journal.results()
        if r.get("part") == part.n and isinstance(r.get("id"), str)
    }
    seen: set[str] = set()
    if status.state == "ended":
        async for raw in codec.results(session, status):
            vid = raw.custom_id  # the vendor's: any JSON a codec handed on
            cid = by_vid.get(vid) if isinstance(vid, str) else None
            if cid is None:
                logger.warning("batch job %s: a result for an id not in part %d (%s) ignored",
                               job.name, part.n, repr(vid)[:80])  # fmt: skip
                continue
            if cid in seen:
                continue
            seen.add(cid)
            if cid in done:
                continue
            yield write(job, part, cid, raw)
    why = status.error or f"the vendor returned no result for it (batch {status.vendor_state})"
    refused = _refused(codec, status)  # ... until the window ran out: expired, never ran
    for vid, cid in part.ids:
        if cid in seen or cid in done:
            continue
        if refused:
            said = f"the vendor's batch queue refused it until the window ran out ({why})"
            raw = RawResult(vid, "expired", message=said[:500])
        else:
            kind: ErrorKind = "invalid_request" if status.state == "failed" else "protocol"
            if kind == "protocol":
                missing.append(cid)
            raw = RawResult(vid, "errored", kind=kind, message=why)
        yield write(job, part, cid, raw)


def _refused(codec: BatchWire, status: BatchStatus) -> bool:
    """Whether the vendor's queue refused the batch after accepting it (none of it ran)."""
    return status.state == "failed" and codec.refused is not None and codec.refused(status)


def plan(job: BatchJob, part: PartState, cid: str) -> Plan:
    p = job._plans.get(cid)
    if p is not None:
        return p
    if job._rows is None:
        job._rows = {str(r.get("id")): r for r in job._journal.requests()}
    return decode_plan(job._rows.get(cid, {}), part.model)


def write(job: BatchJob, part: PartState, cid: str, raw: RawResult) -> BatchResult:
    p = plan(job, part, cid)
    if raw.outcome not in _OUTCOMES:  # a codec's slip: the row still says what it was
        said = f"a result whose outcome is {raw.outcome!r}"[:300]
        raw = RawResult(raw.custom_id, "errored", kind="protocol", message=said)
    if raw.outcome == "succeeded":
        message = read_whole(p, raw.body)
    elif raw.outcome == "expired":
        message = failed_answer(
            p, "expired", raw.message or "the batch's window ran out before this request ran"
        )
    elif raw.outcome == "cancelled":
        message = failed_answer(
            p, "aborted", raw.message or "the batch was cancelled before this request ran"
        )
    else:
        message = failed_answer(
            p, raw.kind or "server", raw.message or "the vendor answered with an error"
        )
    batch_id = part.batch_id or ""  # "": a part cancelled before a vendor took it
    row = {
        "id": cid,
        "part": part.n,
        "batch_id": batch_id,
        "outcome": raw.outcome,
        "message": message.model_dump(mode="json"),
    }
    job._journal.write_result(row, sync=False)
    return BatchResult(cid, raw.outcome, message, batch_id)


async def fill_abandoned(job: BatchJob, part: PartState) -> list[BatchResult]:
    """A part cancelled before its vendor took it: each of its requests comes back
    `cancelled` (kind `aborted`), never a missing row. A resubmitted part's requests
    keep the results they had."""
    if part.retry_of is not None:
        return []
    rows = job._journal.results()
    if {r.get("id") for r in rows if r.get("part") == part.n} >= {c for _, c in part.ids}:
        return []
    async with JobLock(job._journal):
        return write_abandoned(job, part)


def write_abandoned(job: BatchJob, part: PartState) -> list[BatchResult]:
    """`fill_abandoned`'s rows, the job's lock held."""
    if part.retry_of is not None:
        return []
    found: list[BatchResult] = []
    done = {r.get("id") for r in job._journal.results() if r.get("part") == part.n}
    why = "the job was cancelled before this request's part was submitted"
    for vid, cid in part.ids:
        if cid not in done:
            found.append(write(job, part, cid, RawResult(vid, "cancelled", message=why)))
    return found


_OUTCOMES = frozenset(get_args(Outcome))


def result_of(journal: Journal, row: dict[str, Any]) -> BatchResult:
    """A row of results.jsonl as a result; `ValueError` naming the file and the custom id
    when it is not one this version writes (edited by hand)."""
    try:
        message = AssistantMessage.model_validate(row["message"])
        outcome = row.get("outcome", "errored")
        if outcome not in _OUTCOMES:
            raise ValueError(f"'outcome' is {outcome!r}")
    except (KeyError, TypeError, ValueError) as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise ValueError(
            f"batch job {journal.name!r}: {str(journal.dir / 'results.jsonl')!r}: the row of "
            f"{row.get('id')!r} is not one this version writes ({why}): edited by hand? "
            "Remove the row and collect again"
        ) from None
    return BatchResult(str(row["id"]), outcome, message, str(row.get("batch_id", "")))
