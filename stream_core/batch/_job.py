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
from typing import Any

import anyio

from stream_core import StreamOptions
from stream_core.provider import (
    BatchHTTPError,
    BatchPart,
    BatchSettings,
    BatchStatus,
    BatchWire,
    Plan,
    batch_wire,
)

from ._collect import collect_part, fill_abandoned, finish, result_of, write_abandoned
from ._holds import take
from ._journal import JobLock, Journal
from ._plans import message_cost, wire_of
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

    async def _submit_all(self, *, wait: bool = True) -> None:
        """Every part not yet accepted by its vendor is found or submitted; `wait=False`:
        not now when another worker holds the job (it is submitting)."""
        async with _locked(self._journal, wait=wait) as held:
            if not held:
                return
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
                    await _learn_queue(codec, part, exc.retry_after, self.settings)
                raise
            self._accepted(part, batch_id, adopted=False)
        finally:
            await session.aclose()

    def _accepted(self, part: PartState, batch_id: str, *, adopted: bool) -> None:
        self._journal.record("submitted", part=part.n, batch_id=batch_id, adopted=adopted)
        part.batch_id = batch_id

    async def _requeue(self, part: PartState) -> None:
        """The vendor's queue refused the part's batch after accepting it: journaled, the
        pause learned for every process, and the part left to be submitted again (its hold
        kept; its uploaded files reused)."""
        assert part.batch_id is not None
        self._journal.record("refused", part=part.n, batch_id=part.batch_id)
        logger.warning(
            "batch job %s: part %d (batch %s) was refused by %s's batch queue; it is "
            "submitted again after %g s",
            self.name, part.n, part.batch_id, self._codec(part).name, self.settings.queue_pause,
        )  # fmt: skip
        part.refused.append(part.batch_id)
        part.batch_id, part.asked = None, False
        await _learn_queue(self._codec(part), part, None, self.settings)  # names no time

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
        # Never waits for a worker that is submitting (a progress display would hang for
        # the whole upload), nor raises for a vendor queue that is full: "submitting".
        await self._submit_pending(wait=False)
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
                found.append(result_of(self._journal, latest[cid]))
        return found

    async def results(self) -> AsyncIterator[BatchResult]:
        """Results as they become available: each ended part's results are read, written and
        yielded once; parts still running are left for a later call (`collect` waits).
        A part the vendor's batch queue will not take yet (`BatchHTTPError` kind
        `rate_limit`) does not stop the others: that error is raised after them."""
        self.state = JobState.load(self._journal)  # other processes may have moved it on
        queue_full = await self._submit_pending()
        for part in sorted(self.state.parts.values(), key=lambda p: p.n):
            if part.abandoned:
                for result in await fill_abandoned(self, part):
                    yield result
                continue
            if part.collected:
                await finish(self, part)
                continue
            if part.batch_id is None:
                continue
            # Yielded once the job's lock is let go: the caller's loop may cancel the job,
            # resubmit or open it again (waiting on a lock its own task holds: a deadlock).
            for result in await collect_part(self, part):
                yield result
        queue_full = await self._submit_pending() or queue_full  # a part refused just now
        if queue_full is not None:
            raise queue_full

    async def _submit_pending(self, *, wait: bool = True) -> BatchHTTPError | None:
        """Submit the parts no vendor has taken; the `rate_limit` error of a vendor queue
        that will not take one yet is returned, not raised (the other parts go on)."""
        if not any(
            p.batch_id is None and not (p.cancelled or p.abandoned)
            for p in self.state.parts.values()
        ):
            return None
        try:
            await self._submit_all(wait=wait)
        except BatchHTTPError as exc:
            if exc.kind != "rate_limit":
                raise
            return exc
        return None

    async def collect(
        self, *, interval: float = 30.0, timeout: float | None = None
    ) -> list[BatchResult]:
        """Wait until every part has ended, collecting as they do; every result (those of
        earlier runs included, the latest per custom id). A part the vendor's batch queue
        refused is submitted again when its queue takes it, within `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                async for _ in self.results():
                    pass
            except BatchHTTPError as exc:
                if exc.kind != "rate_limit":
                    raise
                logger.info("batch job %s: waiting for the batch queue (%s)", self.name, exc)
            self.state = JobState.load(self._journal)
            live = [p for p in self.state.parts.values() if not p.abandoned]
            if all(p.collected for p in live):
                return self.stored_results()
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"batch job {self.name!r}: not ended after {timeout} s")
            await anyio.sleep(interval)

    async def _settle(self, part: PartState) -> None:
        if part.hold is None or part.settled:
            return
        rows = self._latest()
        actual = sum(
            message_cost(result_of(self._journal, rows[c]).message)
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
        Requests it did not run come back `cancelled` (kind `aborted`) when collected.
        A part whose vendor fails to answer does not stop the others: every part is asked,
        then the first such `BatchHTTPError` is raised."""
        failed: list[BatchHTTPError] = []
        async with _locked(self._journal):
            self.state = JobState.load(self._journal)
            for part in self.state.parts.values():
                if part.collected or part.abandoned:
                    continue
                try:
                    await self._cancel_part(part)
                except BatchHTTPError as exc:
                    failed.append(exc)
        if failed:
            raise failed[0]

    async def _cancel_part(self, part: PartState) -> None:
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
                write_abandoned(self, part)  # its rows now: list_jobs counts it done
                return
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
        from ._resubmit import resubmit

        return await resubmit(self)


_locked = JobLock
"""The job's lock (the name `_submit` imports)."""


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


async def _learn_queue(
    codec: BatchWire, part: PartState, retry_after: float | None, settings: BatchSettings
) -> None:
    """A pause of the vendor's `retry_after` (else `settings.queue_pause`) seconds, shared
    by every process using the limit store."""
    from stream_core._limits import limiter

    pause = retry_after if retry_after is not None else settings.queue_pause
    await limiter.share_cool(_queue_key(codec, part), time.time() + min(pause, 3600.0))
