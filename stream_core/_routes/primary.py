"""A route that waits for its primary, and the counts of what each deployment served.

`Route(wait_for_primary=True)` (strategy `order`): the first deployment is the one the
caller wants. While it is merely at its quota it is waited for, never passed over:

- the limiter's wait for it (its rate limit as its headers report it, a limit learned from
  them, a 429's pause, its concurrency slots) is waited within the call's
  `max_retry_delay` and `total_timeout`, as for a call to one model;
- its attempt keeps the caller's `max_retries`, so a 429 whose `Retry-After` fits
  `max_retry_delay` is retried on it, not answered by the next deployment;
- a route cooldown of its own that comes of rate limits only (an earlier call's 429, the
  limiter's pause) is waited out when the call may wait that long.

The call moves to the next deployment only on a real failure: a server error,
`overloaded`, a timeout, a network error, `auth`, `not_found`, or a wait longer than the
call allows (a `Retry-After` past `max_retry_delay`, a limit that frees past it); the
route's cooldown for such a failure (`Deployment.fault_until`) is not waited for.

Counts: each deployment's `served` is the answers it gave (a fallback's answer is the
fallback's); with a shared limit store the same counts are kept there under the route's
`name` (`limiter.tally`), for every process.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._limits import limiter

if TYPE_CHECKING:
    from .route import Deployment, Route

__all__ = [
    "check",
    "counts_shared",
    "default_name",
    "pick",
    "shared_served",
    "tally_served",
    "waits",
]

logger = logging.getLogger("stream_core")

TALLY_PREFIX = "route:"
"""What a route's shared counts are kept under, before its `name`."""
MAX_NAME = 190
"""A route's name, at most: with `TALLY_PREFIX`, within a shared tally's 200 characters."""


def check(strategy: str, wait_for_primary: object, name: object) -> None:
    """`Route`'s arguments of this module, checked as the constructor checks its others."""
    if not isinstance(wait_for_primary, bool):
        raise TypeError(f"Route.wait_for_primary: expected True or False, got {wait_for_primary!r}")
    if wait_for_primary and strategy != "order":
        raise ValueError(
            f"Route.wait_for_primary: the primary is the first deployment of strategy "
            f"'order'; strategy {strategy!r} picks another first choice for each call"
        )
    if name is not None and (
        not isinstance(name, str) or not name or len(name) > MAX_NAME or not name.isprintable()
    ):
        raise ValueError(f"Route.name: expected 1 to {MAX_NAME} printable characters, got {name!r}")


def default_name(deployments: Sequence[Deployment]) -> str:
    """A name from the deployments' labels (providers, ids, hosts; never a key): the
    routes of two processes made of the same deployments in the same order share it."""
    labels = "\n".join(d.label for d in deployments)
    return hashlib.sha256(labels.encode()).hexdigest()[:16]


def waits(route: Route, d: Deployment) -> bool:
    """Whether `d` is a primary the route waits for (no pass-over, its own retries)."""
    return route.wait_for_primary and d is route.deployments[0]


def pick(
    route: Route, plan: list[Deployment], may_wait: Callable[[float], bool]
) -> tuple[Deployment | None, float]:
    """The next deployment of `plan` to send the call to and the seconds to wait first:
    the primary, when the route waits for it, it is untried and any cooldown it has is
    of rate limits only and fits what the call may wait; else the first ready one; else
    (None, seconds until the earliest is ready)."""
    if route.wait_for_primary:
        first = route.deployments[0]
        if first in plan and route.clock() >= first.fault_until:
            wait = route.ready_in(first)
            if wait == 0 or may_wait(wait):
                return first, wait
    d = next((o for o in plan if route.ready_in(o) == 0), None)
    if d is not None:
        return d, 0.0
    return None, min(route.ready_in(o) for o in plan)


def _shared() -> Any:
    """`limiter.tally`, when the configured store is shared and counts; else None."""
    cfg = limiter.config
    if cfg.store is cfg.local:
        return None
    return getattr(limiter, "tally", None)


def counts_shared() -> bool:
    """Whether a served answer is counted in a shared store too (`tally_served`)."""
    return _shared() is not None


async def tally_served(route: Route, d: Deployment) -> None:
    """Count `d`'s answer in the shared store; never raises (a store that fails loses
    the count there, not the call)."""
    tally = _shared()
    if tally is None:
        return
    try:
        await tally(TALLY_PREFIX + route.name, **{_field(d): 1})
    except Exception as exc:  # the count is a report: never a failed call
        logger.debug("route %s: shared count lost (%s)", route.name, type(exc).__name__)


def _field(d: Deployment) -> str:
    """The deployment's field in the shared tally: its label (a tally's field is at most
    200 characters)."""
    return d.label[:200]


async def shared_served(route: Route) -> dict[str, int] | None:
    """Every process's answers by deployment label (this route's labels, in order; 0
    for one not counted yet), or None without a shared store that counts."""
    cfg = limiter.config
    tallies = getattr(limiter, "tallies", None)
    if cfg.store is cfg.local or tallies is None:
        return None
    found = await tallies(TALLY_PREFIX + route.name)
    counts = found if isinstance(found, dict) else {}
    out: dict[str, int] = {}
    for d in route.deployments:
        n = counts.get(_field(d), 0)
        ok = isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n)
        out[d.label] = max(int(n), 0) if ok else 0
    return out
