"""Starting, reopening and recovering jobs (the door's functions)."""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from stream_core import Model, StreamOptions
from stream_core.provider import BatchHTTPError, BatchSettings, BatchStatus, batch_wire

from ._holds import budgets_of, hold_budget_of, hold_id, release, safe, safe_model
from ._job import BatchJob
from ._journal import JobLock, Journal, check_name, read_lines
from ._plans import PartPlan, make_parts, wire_of
from ._session import HttpSession
from ._state import JobState
from ._types import BatchRequest, JobProgress

if TYPE_CHECKING:
    pass

logger = logging.getLogger("stream_core")

__all__ = ["list_jobs", "open_job", "recover", "submit", "vendor_batches"]


async def submit(
    requests: Iterable[BatchRequest],
    *,
    store: str | os.PathLike[str],
    name: str | None = None,
    settings: BatchSettings | None = None,
) -> BatchJob:
    """Submit `requests` as one job kept under `store` (a directory), and return it once
    every part is accepted by its vendor.

    Each request is planned as `stream()` would send it and refused here as `stream()`
    would refuse it (the custom id and field named). Naming the job makes this idempotent:
    run the same script again after a crash and the job `name` already under `store` is
    resumed (parts already accepted are not submitted again; parts a killed process may
    have created are found first), never duplicated. The rerun may pass fewer of the
    job's requests (those a `ResultLog` has not recorded): the job resumes whole; a request
    the job does not hold raises `ValueError`."""
    settings = settings or BatchSettings()
    reqs = list(requests)
    if not reqs:
        raise ValueError("requests: a batch needs at least one request")
    job_name = check_name(name) if name is not None else f"batch-{secrets.token_hex(5)}"
    journal = Journal(store, job_name)
    planned = None
    if not journal.exists:
        # Planned before anything is written: a refused request leaves no trace.
        nonce = secrets.token_hex(5)
        planned = (nonce, *make_parts(reqs, nonce))
        await _check_keys(planned[1])
    async with JobLock(journal):
        if journal.exists:
            state = JobState.load(journal)
            _, plans, _ = make_parts(reqs, state.nonce, whole=False)
            have = {cid for p in state.parts.values() for _, cid in p.ids}
            extra = sorted(set(plans) - have)
            if extra:
                raise ValueError(
                    f"name: job {job_name!r} already exists under {str(store)!r} without "
                    f"requests {extra[:3]}{' ...' if len(extra) > 3 else ''}; choose another "
                    "name for them"
                )
            # Fewer requests than the job holds: a rerun that left out what it already has
            # (a `ResultLog`'s pending ids) resumes the job whole. Those left out were sent
            # and are billed: a new job for the rest would pay for them twice.
            job = BatchJob(journal, settings, plans=plans)
        else:
            assert planned is not None
            nonce, parts, plans, rows = planned
            journal.write_requests(rows)
            for part in parts:
                journal.write_part(part.n, _jsonl(part))
            holds = {p.n: hold_id(job_name, p) if budgets_of(p) else None for p in parts}
            # The job and every part in one write: a kill leaves all or none of them (a job
            # missing a part's record was resumed without it, or "collected" with nothing).
            # Each part names its hold before it is taken: one a kill left untaken is taken
            # (once: by its id) before the part's create.
            journal.write_head(
                [("job", {"name": job_name, "nonce": nonce, "total": len(reqs),
                          "parts": len(parts)})]
                + [("part", {
                    "part": p.n, "tag": p.tag, "model": safe_model(p.model),
                    "headers": safe(p.headers), "endpoint": p.endpoint, "count": len(p.ids),
                    "worst": p.worst_usd, "hold": holds[p.n],
                    "budgets": budgets_of(p) if holds[p.n] else [],
                }) for p in parts]
            )  # fmt: skip
            held: list[tuple[PartPlan, str]] = []
            try:
                for part in parts:
                    hold = await hold_budget_of(job_name, part, settings)
                    if hold is not None:
                        held.append((part, hold))
            except BatchHTTPError:
                # Nothing was sent to a vendor: the holds go back and the job leaves no trace.
                await release(held)
                shutil.rmtree(journal.dir, ignore_errors=True)
                raise
            job = BatchJob(journal, settings, plans=plans)
    await job._submit_all()
    return job


async def _check_keys(parts: list[PartPlan]) -> None:
    """A part with no credential is refused before the job is written or its budget held,
    as `stream()` sends nothing without a key (else an unnamed job is left behind, its
    budget held for days, under a name the caller never saw)."""
    from stream_core.provider import credentials

    for part in parts:
        found = await credentials(wire_of(part.model), part.model, part.options)
        if found.missing is not None:
            raise BatchHTTPError(
                "auth", None, f"request {part.ids[0]!r}: {found.missing}; nothing was submitted"
            )


def _jsonl(part: PartPlan) -> bytes:
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in part.lines).encode()


def open_job(
    store: str | os.PathLike[str],
    name: str,
    *,
    settings: BatchSettings | None = None,
    options: StreamOptions | None = None,
) -> BatchJob:
    """A job under `store` by name (another process's, or one killed), to poll, collect or
    cancel. `options` supplies credentials where the environment does not."""
    journal = Journal(store, name)
    if not journal.exists:
        raise FileNotFoundError(f"no batch job {name!r} under {str(store)!r}")
    return BatchJob(journal, settings or BatchSettings(), options=options)


def list_jobs(store: str | os.PathLike[str]) -> list[tuple[str, JobProgress]]:
    """Each job under `store` and what its journal says (no vendor is asked)."""
    root = Path(store)
    found: list[tuple[str, JobProgress]] = []
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir()):
        journal = Journal(root, entry.name) if _named(entry.name) else None
        try:
            if journal is None or not journal.exists:
                continue
            state = JobState.load(journal)
        except (PermissionError, ValueError) as exc:
            # Another user's entry in a shared store, or a journal edited by hand: said,
            # and the other jobs still listed (and recovered).
            logger.warning("batch jobs under %r: %s skipped: %s", str(root), entry.name, exc)
            continue
        rows = {r.get("id"): r for r in read_lines(journal.dir / "results.jsonl")}
        parts = [p for p in state.parts.values() if not p.abandoned]
        if all(p.collected for p in parts):  # none left: every part cancelled unsent
            word = "collected"
        elif any(p.batch_id is None for p in parts):
            word = "submitting"
        else:
            word = "running"
        outcomes = [r.get("outcome") for r in rows.values()]
        found.append(
            (
                entry.name,
                JobProgress(
                    state=word,
                    total=state.total,
                    succeeded=outcomes.count("succeeded"),
                    errored=outcomes.count("errored"),
                    expired=outcomes.count("expired"),
                    cancelled=outcomes.count("cancelled"),
                    collected=len(rows),
                ),
            )
        )
    return found


def _named(name: str) -> bool:
    try:
        check_name(name)
    except ValueError:
        return False
    return True


async def recover(
    store: str | os.PathLike[str],
    *,
    settings: BatchSettings | None = None,
    options: StreamOptions | None = None,
) -> list[BatchJob]:
    """Every job under `store` not yet collected, its interrupted submissions finished
    (found at the vendor, or submitted): what a restarted process calls first."""
    jobs: list[BatchJob] = []
    for name, progress in list_jobs(store):
        if progress.state == "collected":
            continue
        job = open_job(store, name, settings=settings, options=options)
        await job._submit_all()
        jobs.append(job)
    return jobs


async def vendor_batches(
    model: Model,
    *,
    options: StreamOptions | None = None,
    settings: BatchSettings | None = None,
    limit: int = 100,
) -> list[BatchStatus]:
    """The batches the vendor of `model` lists for this key, newest first (at most
    `limit`): a job's or anyone's."""
    codec = batch_wire(model)
    options = options or StreamOptions()
    if options.base_url and options.base_url != model.base_url:
        model = model.model_copy(update={"base_url": options.base_url})
    session = HttpSession(wire_of(model), model, options, settings or BatchSettings(), None, None)
    found: list[BatchStatus] = []
    try:
        listing: AsyncIterator[BatchStatus] = codec.listing(session)
        async for status in listing:
            found.append(status)
            if len(found) >= limit:
                break
    finally:
        await session.aclose()
    return found
