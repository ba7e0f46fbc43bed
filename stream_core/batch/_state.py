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
    kept: bool = False
    """Collected with requests the vendor gave no result for: its files are never deleted."""
    settled: bool = False
    cleaned: bool = False
    retry_of: int | None = None
    refused: list[str] = field(default_factory=list)
    """The vendor batches its queue refused after accepting them (none of their requests
    ran): the part was submitted again."""


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
        """The job's state from its files; `ValueError` naming the file and record when
        one holds what this version never writes (edited by hand): never a guess."""
        records = journal.records()
        head = next((r for r in records if r.get("event") == "job"), None)
        if head is None:
            raise ValueError(f"batch job {journal.name!r}: its journal has no job record")
        try:
            state = cls(
                name=journal.name,
                nonce=_text(head, "nonce"),
                total=_int(head, "total"),
                created_at=_number(head, "at"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _edited(journal, "journal.jsonl", records.index(head) + 1, exc) from None
        by_part: dict[int, list[tuple[str, str]]] = {}
        for i, row in enumerate(journal.requests(), 1):
            try:
                ids = (_text(row, "vid"), _text(row, "id"))
                by_part.setdefault(_int(row, "part"), []).append(ids)
            except (KeyError, TypeError, ValueError) as exc:
                raise _edited(journal, "requests.jsonl", i, exc) from None
        for i, r in enumerate(records, 1):
            try:
                state._apply(r, by_part)
            except (KeyError, TypeError, ValueError) as exc:
                raise _edited(journal, "journal.jsonl", i, exc) from None
        return state

    def _apply(self, r: dict[str, Any], by_part: dict[int, list[tuple[str, str]]]) -> None:
        event = r.get("event")
        n = r.get("part")
        if event == "part" and isinstance(n, int):
            ids = _pairs(r["ids"]) if "ids" in r else by_part.get(n, [])
            budgets = r.get("budgets") or []
            if not isinstance(budgets, list) or not all(
                b is None or isinstance(b, str) for b in budgets
            ):
                raise ValueError(f"'budgets' is {budgets!r}")
            hold, retry_of = r.get("hold"), r.get("retry_of")
            if hold is not None and not isinstance(hold, str):
                raise ValueError(f"'hold' is {hold!r}")
            if retry_of is not None and type(retry_of) is not int:
                raise ValueError(f"'retry_of' is {retry_of!r}")
            headers = r.get("headers") or {}
            if not isinstance(headers, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
            ):
                raise ValueError(f"'headers' is {headers!r}")
            self.parts[n] = PartState(
                n=n,
                tag=_text(r, "tag"),
                model=Model.model_validate(r["model"]),
                headers=dict(headers),
                endpoint=str(r.get("endpoint") or ""),
                count=_int(r, "count"),
                worst=_number(r, "worst"),
                hold=hold,
                budgets=budgets,
                at=_number(r, "at"),
                ids=ids,
                retry_of=retry_of,
            )
            return
        part = self.parts.get(n) if isinstance(n, int) else None
        if part is None:
            return
        if event == "step":
            part.steps.update({k: v for k, v in r.items() if k not in ("event", "at", "part")})
        elif event == "create":
            part.asked = True
        elif event == "submitted":
            part.batch_id = _text(r, "batch_id")
        elif event == "refused":
            part.refused.append(_text(r, "batch_id"))
            part.batch_id, part.asked = None, False
        elif event == "cancel":
            part.cancelled = True
        elif event == "abandoned":
            part.abandoned = True
        elif event == "collected":
            part.collected = True
            part.kept = r.get("kept") is True
        elif event == "settled":
            part.settled = True
        elif event == "cleaned":
            part.cleaned = True


def _edited(journal: Journal, file: str, n: int, exc: Exception) -> ValueError:
    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if isinstance(exc, KeyError):
        why = f"no {why}"
    return ValueError(
        f"batch job {journal.name!r}: {str(journal.dir / file)!r}, record {n}, is not one "
        f"this version writes ({why}): edited by hand? Restore it; the vendor's batches of "
        "the job are listed by stream_core.batch.vendor_batches"
    )


def _text(r: dict[str, Any], key: str) -> str:
    value = r[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} is {value!r}, not a string")
    return value


def _int(r: dict[str, Any], key: str) -> int:
    value = r[key]
    if type(value) is not int or value < 0:
        raise ValueError(f"{key!r} is {value!r}, not a count")
    return value


def _number(r: dict[str, Any], key: str) -> float:
    value = r[key]
    if type(value) not in (int, float):
        raise ValueError(f"{key!r} is {value!r}, not a number")
    return float(value)


def _pairs(value: object) -> list[tuple[str, str]]:
    if not isinstance(value, list) or not all(
        isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in value
    ):
        raise ValueError("'ids' is not a list of [vendor id, custom id] pairs")
    return [(x[0], x[1]) for x in value]
