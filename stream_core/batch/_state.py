"""A job's state, read back from its journal (`_journal`): which parts exist, what each
step made, which vendor batch each part became, what is collected, settled, cleaned."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stream_core import Model

from ._journal import Journal

__all__ = ["JobState", "PartState"]


@dataclass
class PartState:
    n: int
    tag: str
    model: Model
    headers: dict[str, str]
    endpoint: str
    count: int
    worst: float
    hold: str | None
    budgets: list[str | None]
    at: float
    ids: list[tuple[str, str]] = field(default_factory=list)
    """(vendor-side id, caller's id) per line."""
    steps: dict[str, Any] = field(default_factory=dict)
    asked: bool = False
    """A create was sent (its answer may have been lost)."""
    batch_id: str | None = None
    cancelled: bool = False
    abandoned: bool = False
    collected: bool = False
    settled: bool = False
    cleaned: bool = False
    retry_of: int | None = None


@dataclass
class JobState:
    name: str
    nonce: str
    total: int
    parts: dict[int, PartState] = field(default_factory=dict)
    created_at: float = 0.0

    def retried(self) -> set[tuple[int, str]]:
        """(part, custom id) of each request submitted again in a later part of its own
        (`resubmit_expired`) that is not abandoned: that part's result supersedes this one's,
        even before it is collected."""
        return {
            (p.retry_of, cid)
            for p in self.parts.values()
            if p.retry_of is not None and not p.abandoned
            for _, cid in p.ids
        }

    def own_rows(self, part: PartState, rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows of `rows` (the latest per custom id) that `part` ran: a request
        resubmitted counts once, in the part that ran it last (or runs it now)."""
        retried = self.retried()
        return [
            rows[c]
            for _, c in part.ids
            if c in rows and rows[c].get("part") == part.n and (part.n, c) not in retried
        ]

    @classmethod
    def load(cls, journal: Journal) -> JobState:
        records = journal.records()
        head = next((r for r in records if r.get("event") == "job"), None)
        if head is None:
            raise ValueError(f"batch job {journal.name!r}: its journal has no job record")
        state = cls(
            name=journal.name,
            nonce=str(head.get("nonce", "")),
            total=int(head.get("total") or 0),
            created_at=float(head.get("at") or 0.0),
        )
        rows = journal.requests()
        by_part: dict[int, list[tuple[str, str]]] = {}
        for row in rows:
            if isinstance(row.get("part"), int):
                by_part.setdefault(row["part"], []).append((str(row["vid"]), str(row["id"])))
        for r in records:
            event = r.get("event")
            n = r.get("part")
            if event == "part" and isinstance(n, int):
                ids = [tuple(x) for x in r["ids"]] if isinstance(r.get("ids"), list) else None
                state.parts[n] = PartState(
                    n=n,
                    tag=str(r["tag"]),
                    model=Model.model_validate(r["model"]),
                    headers=dict(r.get("headers") or {}),
                    endpoint=str(r.get("endpoint") or ""),
                    count=int(r.get("count") or 0),
                    worst=float(r.get("worst") or 0.0),
                    hold=r.get("hold"),
                    budgets=list(r.get("budgets") or []),
                    at=float(r.get("at") or 0.0),
                    ids=ids if ids is not None else by_part.get(n, []),
                    retry_of=r.get("retry_of"),
                )
                continue
            part = state.parts.get(n) if isinstance(n, int) else None
            if part is None:
                continue
            if event == "step":
                part.steps.update({k: v for k, v in r.items() if k not in ("event", "at", "part")})
            elif event == "create":
                part.asked = True
            elif event == "submitted":
                part.batch_id = str(r["batch_id"])
            elif event == "cancel":
                part.cancelled = True
            elif event == "abandoned":
                part.abandoned = True
            elif event == "collected":
                part.collected = True
            elif event == "settled":
                part.settled = True
            elif event == "cleaned":
                part.cleaned = True
        return state
