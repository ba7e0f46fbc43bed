"""`BatchJob`: one job's life, from submission to the last result, across processes.

Submission, for each part: the budget hold (its worst case at the batch price), then a
`part` record, then the vendor is asked (`create` record first, `submitted` with its
batch id after). A process killed anywhere in between leaves a journal that says what
might exist: the next `submit` of the same job name (or `recover`) asks the vendor for the
part's batch (`BatchWire.find`) before it creates one, so a part is never billed twice
and never left uncollected. Collection writes each result as it is read, skipping those
already on disk, then settles the part's hold to its exact cost and cleans its files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any, get_args

import anyio

from stream_core import AssistantMessage, ErrorKind, StreamOptions
from stream_core.provider import (
    BatchHTTPError,
    BatchPart,
    BatchSettings,
    BatchStatus,
    BatchWire,
    Outcome,
    Plan,
    RawResult,
    batch_wire,
    failed_answer,
    read_whole,
)

from ._holds import take
from ._journal import Journal
from ._plans import decode_plan, message_cost, wire_of
from ._session import HttpSession
from ._state import JobState, PartState
from ._types import BatchResult, JobProgress

__all__ = ["BatchJob"]

logger = logging.getLogger("stream_core")

_FIND_SKEW = 300.0
"""Seconds before a part's record a vendor's batch may say it was created (clock skew)."""


class BatchJob:
    """A submitted job (`stream_core.batch.submit`, `open_job`, `recover`)."""

    def __init__(
        self,
        journal: Journal,
        settings: BatchSettings,
        options: StreamOptions | None = None,
        plans: dict[str, Plan] | None = None,
    ) -> None:
        self._journal = journal
        self.settings = settings
        self._options = options
        self._plans: dict[str, Plan] = dict(plans or {})
        self._rows: dict[str, dict[str, Any]] | None = None
        self._cleaning: set[int] = set()
        """Parts whose files this object tried to delete."""
        self.state = JobState.load(journal)

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def batch_ids(self) -> list[str]:
        """The vendor's batch ids of the job's parts, as far as accepted."""
        return [p.batch_id for p in self.state.parts.values() if p.batch_id]

    def __repr__(self) -> str:
        return f"BatchJob({self.name!r}, parts={len(self.state.parts)}, total={self.state.total})"

    # --- sessions --------------------------------------------------------------------------

    def _session(self, part: PartState) -> HttpSession:
        options = self._options_for(part)
        # The caller's model when this process has it (its headers may carry a credential
        # the journal leaves out), else the journal's.
        model = next((self._plans[c].model for _, c in part.ids if c in self._plans), part.model)
        return HttpSession(
            wire_of(model), model, options, self.settings, self._journal, part.n,
            recorded=part.steps,
        )  # fmt: skip

    def _options_for(self, part: PartState) -> StreamOptions:
        if self._options is not None:
            return self._options
        for _vid, cid in part.ids:
            p = self._plans.get(cid)
            if p is not None:
                return p.options
        return StreamOptions()

    def _codec(self, part: PartState) -> BatchWire:
        return batch_wire(part.model)

    def _part(self, part: PartState) -> BatchPart:
        import json

        lines = [json.loads(x) for x in self._journal.part_bytes(part.n).splitlines() if x.strip()]
        return BatchPart(part.tag, part.model, lines, part.headers, part.endpoint)

    # --- submission ------------------------------------------------------------------------

    async def _submit_all(self) -> None:
        """Every part not yet accepted by its vendor is found or submitted."""
        async with _locked(self._journal):
            self.state = JobState.load(self._journal)
            for part in sorted(self.state.parts.values(), key=lambda p: p.n):
                if part.batch_id is None and not part.cancelled and not part.abandoned:
                    await self._submit_part(part)

    async def _submit_part(self, part: PartState) -> None:
        codec = self._codec(part)
        session = self._session(part)
        try:
            spec = self._part(part)
            if part.asked:
                since = part.at - _FIND_SKEW
                found = await codec.find(session, spec, since)
                if found:
                    self._accepted(part, found[0], adopted=True)
                    if len(found) > 1:
                        # Never cancelled: a vendor that keeps no tag (Anthropic) cannot
                        # tell this part's batch from another worker's of the same size.
                        logger.warning(
                            "batch job %s: part %d matches %d vendor batches (%s); adopted "
                            "the first, left the others alone",
                            self.name, part.n, len(found), ", ".join(found[:5]),
                        )  # fmt: skip
                    return
            if part.hold is not None and not part.asked:
                # Taken at submission, unless a kill came first (a no-op when held).
                what = (
                    f"part {part.n} ({part.model.provider}/{part.model.id}, {part.count} requests)"
                )
                await take(part.hold, part.budgets, part.worst, self.settings, what)
            await _queue_wait(codec, part, self.settings)
            self._journal.record("create", part=part.n)
            part.asked = True
            try:
                batch_id = await codec.submit(session, spec)
            except BatchHTTPError as exc:
                if exc.kind == "rate_limit":
                    await _learn_queue(codec, part, exc)
                raise
            self._accepted(part, batch_id, adopted=False)
        finally:
            await session.aclose()

    def _accepted(self, part: PartState, batch_id: str, *, adopted: bool) -> None:
        self._journal.record("submitted", part=part.n, batch_id=batch_id, adopted=adopted)
        part.batch_id = batch_id

    # --- progress --------------------------------------------------------------------------

    async def statuses(self) -> dict[int, BatchStatus]:
        """Each accepted part's status, as its vendor says now."""
        found: dict[int, BatchStatus] = {}
        for part in self.state.parts.values():
            if part.batch_id is None or part.collected:
                continue
            session = self._session(part)
            try:
                found[part.n] = await self._codec(part).status(session, part.batch_id)
            except BatchHTTPError:
                if not self._collected_meanwhile(part):
                    raise
            finally:
                await session.aclose()
        return found

    def _collected_meanwhile(self, part: PartState) -> bool:
        """Whether another process (or job object) collected the part since this one read
        the journal: its vendor batch may be deleted (a status of it is then an error)."""
        self.state = JobState.load(self._journal)
        return self.state.parts[part.n].collected

    async def poll(self) -> JobProgress:
        """Where the job is (see `JobProgress`); submits any part a killed process left."""
        self.state = JobState.load(self._journal)  # other processes may have moved it on
        if any(
            p.batch_id is None and not (p.cancelled or p.abandoned)
            for p in self.state.parts.values()
        ):
            await self._submit_all()
        statuses = await self.statuses()
        counts = [s.counts for s in statuses.values()]
        rows = self._latest()
        collected = len(rows)
        from stream_core.provider import BatchCounts

        for part in self.state.parts.values():
            if part.collected or part.abandoned:
                mine = self.state.own_rows(part, rows)
                counts.append(
                    BatchCounts(
                        total=len(part.ids),
                        succeeded=sum(r.get("outcome") == "succeeded" for r in mine),
                        errored=sum(r.get("outcome") == "errored" for r in mine),
                        expired=sum(r.get("outcome") == "expired" for r in mine),
                        cancelled=sum(r.get("outcome") == "cancelled" for r in mine),
                    )
                )
        parts = [p for p in self.state.parts.values() if not p.abandoned]
        if all(p.collected for p in parts):
            state = "collected"
        elif any(p.batch_id is None for p in parts):
            state = "submitting"
        elif all(
            p.collected
            or statuses.get(p.n) is not None
            and statuses[p.n].state in ("ended", "failed")
            for p in parts
        ):
            state = "ended"
        else:
            state = "running"
        progress = JobProgress.of(state, self.state.total, counts, collected)
        failed = sum(1 for s in statuses.values() if s.state == "failed")
        return JobProgress(**{**progress.__dict__, "failed_parts": failed})

    # --- results ---------------------------------------------------------------------------

    def _latest(self) -> dict[str, dict[str, Any]]:
        """The latest result row of each custom id (a resubmitted one supersedes)."""
        latest: dict[str, dict[str, Any]] = {}
        for row in self._journal.results():
            cid = row.get("id")
            if isinstance(cid, str):
                latest[cid] = row
        return latest

    def stored_results(self) -> list[BatchResult]:
        """Every result on disk, the latest per custom id, in submission order."""
        latest = self._latest()
        # The caller's order (requests.jsonl keeps it), not the parts': requests are grouped
        # into parts by model, endpoint and key, so part order interleaves them.
        order = [r["id"] for r in self._journal.requests() if isinstance(r.get("id"), str)]
        order += [
            cid for p in sorted(self.state.parts.values(), key=lambda p: p.n) for _, cid in p.ids
        ]
        seen: set[str] = set()
        found: list[BatchResult] = []
        for cid in order:
            if cid in latest and cid not in seen:
                seen.add(cid)
                found.append(_result(self._journal, latest[cid]))
        return found

    async def results(self) -> AsyncIterator[BatchResult]:
        """Results as they become available: each ended part's results are read, written and
        yielded once; parts still running are left for a later call (`collect` waits)."""
        self.state = JobState.load(self._journal)  # other processes may have moved it on
        if any(
            p.batch_id is None and not (p.cancelled or p.abandoned)
            for p in self.state.parts.values()
        ):
            await self._submit_all()
        for part in sorted(self.state.parts.values(), key=lambda p: p.n):
            if part.abandoned:
                for result in await self._fill_abandoned(part):
                    yield result
                continue
            if part.collected:
                await self._finish(part)
                continue
            if part.batch_id is None:
                continue
            # Yielded once the job's lock is let go: the caller's loop may cancel the job,
            # resubmit or open it again (waiting on a lock its own task holds: a deadlock).
            for result in await self._collect_part(part):
                yield result

    async def collect(
        self, *, interval: float = 30.0, timeout: float | None = None
    ) -> list[BatchResult]:
        """Wait until every part has ended, collecting as they do; every result (those of
        earlier runs included, the latest per custom id)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            async for _ in self.results():
                pass
            self.state = JobState.load(self._journal)
            live = [p for p in self.state.parts.values() if not p.abandoned]
            if all(p.collected for p in live):
                return self.stored_results()
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"batch job {self.name!r}: not ended after {timeout} s")
            await anyio.sleep(interval)

    async def _collect_part(self, part: PartState) -> list[BatchResult]:
        """An ended part's results, each written as it is read, under the job's lock."""
        assert part.batch_id is not None
        codec = self._codec(part)
        session = self._session(part)
        found: list[BatchResult] = []
        try:
            try:
                status = await codec.status(session, part.batch_id)
            except BatchHTTPError:
                if self._collected_meanwhile(part):
                    return found
                raise
            if status.state not in ("ended", "failed"):
                return found
            async with _locked(self._journal):
                self.state = JobState.load(self._journal)
                part = self.state.parts[part.n]
                if part.collected:
                    return found
                async for result in self._read_part(codec, session, part, status):
                    found.append(result)
                self._journal.record("collected", part=part.n, state=status.vendor_state)
                part.collected = True
                await self._settle(part)
                await self._clean(codec, session, part, status)
        finally:
            await session.aclose()
        return found

    async def _clean(
        self, codec: BatchWire, session: HttpSession, part: PartState, status: BatchStatus | None
    ) -> None:
        if not self.settings.delete_files or codec.cleanup is None or part.cleaned:
            return
        self._cleaning.add(part.n)
        try:
            await codec.cleanup(session, status)
            self._journal.record("cleaned", part=part.n)
            part.cleaned = True
        except BatchHTTPError as exc:
            logger.warning("batch job %s: files of part %d not deleted: %s",
                           self.name, part.n, exc.message)  # fmt: skip

    async def _finish(self, part: PartState) -> None:
        """A part collected by a process killed before it settled the part's budget hold
        or deleted its files: both done now (each once; a failed delete is tried again by
        the next job object, not by every `collect` round)."""
        codec = self._codec(part)
        clean = self.settings.delete_files and codec.cleanup is not None and not part.cleaned
        clean = clean and part.n not in self._cleaning
        if (part.hold is None or part.settled) and not clean:
            return
        async with _locked(self._journal):
            self.state = JobState.load(self._journal)
            part = self.state.parts[part.n]
            await self._settle(part)
            if not clean or part.cleaned:
                return
            session = self._session(part)
            try:
                status = None
                if part.batch_id is not None:
                    try:
                        status = await codec.status(session, part.batch_id)
                    except BatchHTTPError:
                        status = None  # gone: the files the part recorded are still known
                await self._clean(codec, session, part, status)
            finally:
                await session.aclose()

    async def _read_part(
        self, codec: BatchWire, session: HttpSession, part: PartState, status: BatchStatus
    ) -> AsyncIterator[BatchResult]:
        by_vid = dict(part.ids)
        done = {
            r["id"]
            for r in self._journal.results()
            if r.get("part") == part.n and isinstance(r.get("id"), str)
        }
        seen: set[str] = set()
        if status.state == "ended":
            async for raw in codec.results(session, status):
                cid = by_vid.get(raw.custom_id)
                if cid is None:
                    logger.warning("batch job %s: a result for an id not in part %d (%r) ignored",
                                   self.name, part.n, raw.custom_id[:80])  # fmt: skip
                    continue
                if cid in seen:
                    continue
                seen.add(cid)
                if cid in done:
                    continue
                yield self._write(part, cid, raw)
        why = status.error or f"the vendor returned no result for it (batch {status.vendor_state})"
        for vid, cid in part.ids:
            if cid not in seen and cid not in done:
                kind: ErrorKind = "invalid_request" if status.state == "failed" else "protocol"
                raw = RawResult(vid, "errored", kind=kind, message=why)
                yield self._write(part, cid, raw)

    def _plan(self, part: PartState, cid: str) -> Plan:
        p = self._plans.get(cid)
        if p is not None:
            return p
        if self._rows is None:
            self._rows = {str(r.get("id")): r for r in self._journal.requests()}
        return decode_plan(self._rows.get(cid, {}), part.model)

    def _write(self, part: PartState, cid: str, raw: RawResult) -> BatchResult:
        p = self._plan(part, cid)
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
        self._journal.write_result(row, sync=False)
        return BatchResult(cid, raw.outcome, message, batch_id)

    async def _fill_abandoned(self, part: PartState) -> list[BatchResult]:
        """A part cancelled before its vendor took it: each of its requests comes back
        `cancelled` (kind `aborted`), never a missing row. A resubmitted part's requests
        keep the results they had."""
        if part.retry_of is not None:
            return []
        rows = self._journal.results()
        if {r.get("id") for r in rows if r.get("part") == part.n} >= {c for _, c in part.ids}:
            return []
        found: list[BatchResult] = []
        async with _locked(self._journal):
            done = {r.get("id") for r in self._journal.results() if r.get("part") == part.n}
            why = "the job was cancelled before this request's part was submitted"
            for vid, cid in part.ids:
                if cid not in done:
                    found.append(self._write(part, cid, RawResult(vid, "cancelled", message=why)))
        return found

    async def _settle(self, part: PartState) -> None:
        if part.hold is None or part.settled:
            return
        rows = self._latest()
        actual = sum(
            message_cost(_result(self._journal, rows[c]).message)
            for _, c in part.ids
            if c in rows and rows[c].get("part") == part.n
        )
        from stream_core._limits import limiter

        await limiter.settle_budget([(b, part.worst, actual, part.hold) for b in part.budgets])
        self._journal.record("settled", part=part.n, usd=actual)
        part.settled = True

    # --- cancel and resubmit ---------------------------------------------------------------

    async def cancel(self) -> None:
        """Ask every vendor batch of the job to stop; parts not yet submitted never will be.
        Requests it did not run come back `cancelled` (kind `aborted`) when collected."""
        async with _locked(self._journal):
            self.state = JobState.load(self._journal)
            for part in self.state.parts.values():
                if part.collected:
                    continue
                if part.batch_id is None:
                    if part.asked:
                        session = self._session(part)
                        try:
                            found = await self._codec(part).find(
                                session, self._part(part), part.at - _FIND_SKEW
                            )
                        finally:
                            await session.aclose()
                        if found:
                            self._accepted(part, found[0], adopted=True)
                    if part.batch_id is None:
                        self._journal.record("abandoned", part=part.n)
                        part.abandoned = True
                        await self._release(part)
                        continue
                session = self._session(part)
                try:
                    await self._codec(part).cancel(session, part.batch_id)
                finally:
                    await session.aclose()
                self._journal.record("cancel", part=part.n)
                part.cancelled = True

    async def _release(self, part: PartState) -> None:
        if part.hold is None:
            return
        from stream_core._limits import limiter

        await limiter.settle_budget([(b, part.worst, 0.0, part.hold) for b in part.budgets])
        self._journal.record("settled", part=part.n, usd=0.0)

    async def resubmit_expired(self) -> int:
        """Submit again, in new parts of this job, every collected request whose latest
        result is `expired`; returns how many. Their new results supersede the old."""
        from ._submit import resubmit

        return await resubmit(self)


_OUTCOMES = frozenset(get_args(Outcome))


def _result(journal: Journal, row: dict[str, Any]) -> BatchResult:
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


class _locked:
    """The job's lock, taken in a worker thread so the event loop never blocks on it."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._cm: Any = None

    async def __aenter__(self) -> None:
        self._cm = self._journal.locked()
        await anyio.to_thread.run_sync(self._cm.__enter__)

    async def __aexit__(self, *exc: object) -> None:
        self._cm.__exit__(None, None, None)


def _queue_key(codec: BatchWire, part: PartState) -> str:
    return f"batch-queue|{codec.name}|{part.model.base_url}"


async def _queue_wait(codec: BatchWire, part: PartState, settings: BatchSettings) -> None:
    """Wait out a queue-full pause any process learned (`_learn_queue`), up to the
    settings' `queue_wait`; past that, `BatchHTTPError` kind `rate_limit`."""
    from stream_core._limits import limiter

    key = _queue_key(codec, part)
    deadline = time.time() + settings.queue_wait
    while True:
        store = limiter.config.store
        try:
            (until,) = await store.cooling([key])
        except Exception:  # noqa: BLE001 - a store that fails: the vendor will say
            return
        now = time.time()
        if until <= now:
            return
        if until > deadline:
            raise BatchHTTPError(
                "rate_limit", None,
                f"{codec.name}'s batch queue is full until {until - now:.0f} s from now "
                f"(learned from a refusal); BatchSettings.queue_wait is {settings.queue_wait} s",
                retry_after=until - now,
            )  # fmt: skip
        await anyio.sleep(min(until - now, 5.0))


async def _learn_queue(codec: BatchWire, part: PartState, exc: BatchHTTPError) -> None:
    from stream_core._limits import limiter

    pause = exc.retry_after if exc.retry_after is not None else 60.0
    await limiter.share_cool(_queue_key(codec, part), time.time() + min(pause, 3600.0))
