"""Expired requests sent again: new parts of the same job (`BatchJob.resubmit_expired`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stream_core.provider import batch_wire

from ._holds import hold_budget_of, safe_model
from ._journal import JobLock
from ._plans import PartPlan
from ._state import JobState

if TYPE_CHECKING:
    from ._job import BatchJob

__all__ = ["resubmit"]


async def resubmit(job: BatchJob) -> int:
    """`BatchJob.resubmit_expired`: new parts of the job for the expired requests, their
    lines exactly as first sent (a vendor-side id is unique within its part), their worst
    case held again (the part's, in proportion)."""
    journal = job._journal
    async with JobLock(journal):
        state = JobState.load(journal)
        latest = job._latest()
        count = 0
        n = max(state.parts) + 1 if state.parts else 0
        retried = state.retried()  # already in a later part: asked again twice, billed twice
        for part in sorted(state.parts.values(), key=lambda p: p.n):
            if not part.collected:
                continue
            expired = [
                (vid, cid)
                for vid, cid in part.ids
                if latest.get(cid, {}).get("outcome") == "expired"
                and latest[cid].get("part") == part.n
                and (part.n, cid) not in retried
            ]
            if not expired:
                continue
            raw = [x for x in journal.part_bytes(part.n).splitlines() if x.strip()]
            index = {vid: i for i, (vid, _) in enumerate(part.ids)}
            journal.write_part(n, b"".join(raw[index[vid]] + b"\n" for vid, _ in expired))
            share = part.worst * len(expired) / max(len(part.ids), 1)
            plan = PartPlan(
                n=n, codec=batch_wire(part.model), tag=f"sc{state.nonce}p{n}", model=part.model,
                options=job._options_for(part), headers=part.headers, endpoint=part.endpoint,
                ids=[cid for _, cid in expired], worst_usd=share,
            )  # fmt: skip
            hold = await hold_budget_of(state.name, plan, job.settings) if part.budgets else None
            journal.record(
                "part", part=n, tag=plan.tag, model=safe_model(part.model),
                headers=part.headers, endpoint=part.endpoint, count=len(expired), worst=share,
                hold=hold, budgets=part.budgets if hold else [], ids=[list(x) for x in expired],
                retry_of=part.n,
            )  # fmt: skip
            n += 1
            count += len(expired)
    if count:
        job.state = JobState.load(journal)
        await job._submit_all()
    return count
