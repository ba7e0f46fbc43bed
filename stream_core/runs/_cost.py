"""What a run cost, by provider and model: counts, tokens, USD, failures and the share
priced at a batch price, from messages, result rows or batch results alike."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stream_core import AssistantMessage

__all__ = ["CostRow", "CostSummary", "cost_summary"]


@dataclass(frozen=True)
class CostRow:
    """One (provider, model)'s results: how many (`count`; `failed` of them with an error,
    `batch` of them priced at a batch price, `unpriced` with no known cost), their tokens
    as `Usage` counts them, and their cost in USD (the priced ones; see `unpriced`)."""

    provider: str
    model: str
    count: int = 0
    failed: int = 0
    batch: int = 0
    unpriced: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    usd: float = 0.0

    @property
    def batch_share(self) -> float:
        """The share of `count` priced at a batch price (0.0 to 1.0)."""
        return self.batch / self.count if self.count else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values (`batch_share` included)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "count": self.count,
            "failed": self.failed,
            "batch": self.batch,
            "batch_share": self.batch_share,
            "unpriced": self.unpriced,
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "reasoning": self.reasoning,
            "usd": self.usd,
        }


_COUNTS: tuple[str, ...] = ("count", "failed", "batch", "unpriced", "input", "output")
_COUNTS += ("cache_read", "cache_write", "reasoning")


@dataclass(frozen=True)
class CostSummary:
    """A run's cost: `rows`, one per (provider, model), most expensive first (then by
    name), and `total`, their sum (provider and model `"*"`). USD is summed exactly
    rounded (`math.fsum`), so it does not depend on the order results arrived in."""

    rows: tuple[CostRow, ...] = ()
    total: CostRow = field(default_factory=lambda: CostRow("*", "*"))

    def table(self) -> str:
        """A plain text table, one line per model and a total line, under the header
        `PROVIDER MODEL COUNT FAILED BATCH INPUT OUTPUT CACHE R CACHE W USD UNPRICED`:
        `BATCH` is the share priced at a batch price, `UNPRICED` the results whose cost
        is unknown (their USD is not in `USD`)."""
        head: tuple[str, ...] = ("PROVIDER", "MODEL", "COUNT", "FAILED", "BATCH", "INPUT")
        head += ("OUTPUT", "CACHE R", "CACHE W", "USD", "UNPRICED")
        lines = [head]
        for r in (*self.rows, self.total):
            name = ("total", "") if r is self.total else (r.provider, r.model)
            lines.append(
                (
                    *name,
                    f"{r.count:,}",
                    f"{r.failed:,}",
                    f"{r.batch_share:.0%}",
                    f"{r.input:,}",
                    f"{r.output:,}",
                    f"{r.cache_read:,}",
                    f"{r.cache_write:,}",
                    _usd(r.usd),
                    f"{r.unpriced:,}",
                )
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        out = []
        for line in lines:
            cells = [
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            ]
            out.append("  ".join(cells).rstrip())
        return "\n".join(out) + "\n"

    def as_dict(self) -> dict[str, Any]:
        """`{"rows": [...], "total": {...}}`, JSON-ready."""
        return {"rows": [r.as_dict() for r in self.rows], "total": self.total.as_dict()}


def _usd(value: float) -> str:
    return f"${value:,.4f}"


def _message(item: object) -> tuple[AssistantMessage, bool]:
    """The message of a message, a `ResultRow` or a `BatchResult`, and whether it was
    priced at a batch price (a row that says so; a batch result: always)."""
    if isinstance(item, AssistantMessage):
        return item, False
    message = getattr(item, "message", None)
    if not isinstance(message, AssistantMessage):
        raise TypeError(
            "cost_summary takes AssistantMessage, ResultRow or BatchResult items, "
            f"not {type(item).__name__}"
        )
    flag = getattr(item, "batch", None)
    if isinstance(flag, bool):
        return message, flag
    return message, bool(getattr(item, "batch_id", None))


def cost_summary(items: Iterable[object]) -> CostSummary:
    """Sum `items` (`AssistantMessage`s, `ResultLog.read(path)` rows or a batch's
    `BatchResult`s, mixed as you like) by the provider and model each message names.

    A failed message counts in `failed` and its tokens and cost (a failure may be billed)
    count too; a message with no cost (`usage.cost` None: prices unknown) counts in
    `unpriced`, its tokens counted, its USD not: the USD is then a lower bound."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    usd: dict[tuple[str, str], list[float]] = {}
    for item in items:
        message, batch = _message(item)
        key = (message.provider, message.model)
        c = counts.setdefault(key, dict.fromkeys(_COUNTS, 0))
        u = message.usage
        c["count"] += 1
        c["failed"] += message.error is not None
        c["batch"] += batch
        c["input"] += u.input
        c["output"] += u.output
        c["cache_read"] += u.cache_read
        c["cache_write"] += u.cache_write
        c["reasoning"] += u.reasoning
        if u.cost is None:
            c["unpriced"] += 1
        else:
            usd.setdefault(key, []).append(u.cost.total)
    rows = [
        CostRow(provider, model, **c, usd=math.fsum(usd.get((provider, model), ())))
        for (provider, model), c in counts.items()
    ]
    rows.sort(key=lambda r: (-r.usd, r.provider, r.model))
    total = CostRow(
        "*",
        "*",
        **{name: sum(c[name] for c in counts.values()) for name in _COUNTS},
        usd=math.fsum(x for values in usd.values() for x in values),
    )
    return CostSummary(tuple(rows), total)
