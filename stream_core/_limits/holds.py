"""The checks of `hold_budget` and `settle_budget` (doors in `limiter`): a batch's budget
reservations, made at submission and settled later, perhaps by another process.

Each reservation is kept in the store under the caller's id and its amount
(`"<id>|<amount>"`, as the admission stage keys its own): a store gives an expired one
back by that amount, and a second hold or settlement of the same id is recognised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import window
from .stores import MAX_NAME

__all__ = ["HOLD_KEY", "hold_asks", "settle_items", "store_id"]

HOLD_KEY = "-"
"""The limit key a hold is admitted under: none (no rate limit applies, nothing is kept)."""


def _usd(x: Any, what: str) -> float:
    if not window.number(x):
        raise TypeError(f"{what} must be a finite number, not {x!r}")
    if x < 0 or x > 1e15:
        raise ValueError(f"{what} must be from 0 to 1e15 USD, not {x!r}")
    return float(x)


def _id(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(f"a reservation id must be a string, not {type(x).__name__}")
    if not x or len(x) > MAX_NAME or not x.isprintable():
        raise ValueError(f"a reservation id must be 1 to {MAX_NAME} printable characters")
    return x


def store_id(rid: str, amount: float) -> str:
    """The reservation as a store keeps it: its id and amount."""
    return f"{rid}|{amount!r}"


def _budget(name: Any, budget_usd: float | None, budgets: Mapping[str, float], global_name: str
            ) -> tuple[str, float] | None:  # fmt: skip
    """(the store's name, the cap) of the budget an ask names; None for the global one
    when none is configured (nothing to hold, as for a call)."""
    if name is None:
        return None if budget_usd is None else (global_name, budget_usd)
    if not isinstance(name, str) or name not in budgets:
        known = ", ".join(sorted(budgets)) or "none are configured"
        raise ValueError(
            f"no budget named {name!r} (configure_limits(budgets=...) names them; {known})"
        )
    return name, budgets[name]


def _items(x: Any, size: int, what: str) -> list[tuple[Any, ...]]:
    if not isinstance(x, list | tuple):
        raise TypeError(f"{what} must be a list of tuples, not {type(x).__name__}")
    out = []
    for item in x:
        if not isinstance(item, list | tuple) or len(item) != size:
            raise TypeError(f"each of {what} must be a tuple of {size}, not {item!r}")
        out.append(tuple(item))
    return out


def hold_asks(
    asks: Any, budget_usd: float | None, budgets: Mapping[str, float], global_name: str
) -> list[list[Any]]:
    """`hold_budget`'s asks, checked, as a store's budget asks ([name, cap, worst case,
    the store's id, seconds held] each); an ask on an unconfigured global budget drops."""
    out = []
    for name, worst, rid, seconds in _items(asks, 4, "hold_budget's asks"):
        found = _budget(name, budget_usd, budgets, global_name)
        worst = _usd(worst, "a hold's worst case")
        rid = _id(rid)
        if not window.number(seconds) or not 0 < seconds <= window.MAX_HOLD:
            raise ValueError(
                f"a hold's seconds must be more than 0 and at most {window.MAX_HOLD:g} "
                f"(window.MAX_HOLD), not {seconds!r}"
            )
        if found is not None:
            out.append([found[0], found[1], worst, store_id(rid, worst), float(seconds)])
    return out


def settle_items(
    settles: Any, budget_usd: float | None, budgets: Mapping[str, float], global_name: str
) -> list[list[Any]]:
    """`settle_budget`'s settlements, checked, as a store's ([name, reserved, actual, the
    store's id, seconds the id is remembered as settled] each)."""
    out = []
    for name, reserved, actual, rid in _items(settles, 4, "settle_budget's settlements"):
        found = _budget(name, budget_usd, budgets, global_name)
        reserved = _usd(reserved, "a settlement's reserved amount")
        actual = _usd(actual, "a settlement's actual cost")
        rid = _id(rid)
        if found is not None:
            out.append([found[0], reserved, actual, store_id(rid, reserved), window.MAX_HOLD])
    return out
