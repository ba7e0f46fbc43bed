"""A part's budget hold: its worst case at the batch price, reserved against the budgets
its requests draw on until the part is settled to its exact cost (`BatchJob._settle`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stream_core import Model
from stream_core.provider import BatchHTTPError, BatchSettings

if TYPE_CHECKING:
    from ._plans import PartPlan

__all__ = [
    "HOLD_SECONDS",
    "budgets_of",
    "hold_budget_of",
    "hold_id",
    "release",
    "safe",
    "safe_model",
    "take",
]

HOLD_SECONDS = 3 * 24 * 3600.0
"""A batch's budget hold lasts past the longest default vendor window (Bedrock's 72 h job
timeout), or a day past `BatchSettings.window_hours` when that is longer, unless settled;
a hold never settled is given back then."""


async def take(
    rid: str, names: list[str | None], worst: float, settings: BatchSettings, what: str
) -> None:
    """Hold `worst` USD under the id `rid` on each budget of `names`, all or none (an id
    already held or settled is not held again: a restarted process may take it again).
    `BatchHTTPError` kind `budget` naming `what` when one budget has too little left."""
    from stream_core._limits import limiter

    seconds = max(HOLD_SECONDS, (settings.window_hours or 0) * 3600.0 + 24 * 3600.0)
    short = await limiter.hold_budget([(n, worst, rid, seconds) for n in names])
    if short is None:
        return
    name, left = short[0], short[1]
    said = "the budget" if name in (None, limiter.GLOBAL_BUDGET) else f"budget {name!r}"
    left_text = "unknown (its store cannot be reached)" if left is None else f"${left:.4f}"
    raise BatchHTTPError(
        "budget", None,
        f"{what} may cost up to ${worst:.4f} at the batch price; {said} has {left_text} "
        "left; nothing was submitted",
    )  # fmt: skip


def safe(headers: dict[str, str]) -> dict[str, str]:
    """Headers without a credential: the journal never holds one."""
    from stream_core._checks import SECRET_HEADERS

    return {k: v for k, v in headers.items() if k.lower() not in SECRET_HEADERS}


def safe_model(model: Model) -> dict[str, object]:
    """The model as the journal keeps it: its credential headers left out (a reopened job
    gets its key from the environment or `open_job(options=...)`)."""
    dump: dict[str, object] = model.model_dump(mode="json")
    dump["headers"] = safe(dict(model.headers))
    return dump


async def release(held: list[tuple[PartPlan, str]]) -> None:
    from stream_core._limits import limiter

    for part, rid in held:
        await limiter.settle_budget([(b, part.worst_usd, 0.0, rid) for b in budgets_of(part)])


def budgets_of(part: PartPlan) -> list[str | None]:
    from stream_core._limits import limiter

    names: list[str | None] = []
    if limiter.config.enabled and limiter.config.budget_usd is not None:
        names.append(None)
    if part.options.budget is not None:
        names.append(part.options.budget)
    return names


def hold_id(job: str, part: PartPlan) -> str:
    return f"batch|{job}|{part.tag}|{part.worst_usd!r}"


async def hold_budget_of(job: str, part: PartPlan, settings: BatchSettings) -> str | None:
    """Reserve the part's worst case against the budgets it draws on; None when none."""
    names = budgets_of(part)
    if not names:
        return None
    rid = hold_id(job, part)
    what = f"part {part.n} ({part.model.provider}/{part.model.id}, {len(part.ids)} requests)"
    await take(rid, names, part.worst_usd, settings, what)
    return rid
