"""A part's budget hold: its worst case at the batch price, reserved against the budgets
its requests draw on until the part is settled to its exact cost (`BatchJob._settle`)."""

from __future__ import annotations

from stream_core.provider import BatchHTTPError, BatchSettings

__all__ = ["HOLD_SECONDS", "take"]

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
