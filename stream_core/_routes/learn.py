"""What one route call teaches its route (`_routes.stream` calls these as attempts end): a
failure cools the deployment, a success forgets its failures in a row, a deployment the
limiter passed over is held back unsent, and with a shared limit store
(`configure_limits(store=...)`) the cooldown and the streak are written there too, for
every process's routes, and what the store answers is taken back.

Also the records: one `Attempt` per deployment tried, and the summary a failed call's
error gives of them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .._limits import limiter
from .._transport import _spawn_detached
from .._types import AssistantMessage, Attempt
from .._usage import ErrorKind, StreamError
from . import primary
from .route import COOLING, Deployment, Route

if TYPE_CHECKING:
    from .stream import RouteStream

__all__ = ["Pending", "attempt", "cooling_error", "failed", "served", "share", "summary"]

Pending = tuple[Deployment, str | None, dict[str, Any], bool]
"""Writes to the shared store still to make: the deployment, its limit key and the
keywords of `limiter.share_cool` (no key: none), and whether to count its answer there
(`primary.tally_served`)."""


def passed_over(stream: Any, error: StreamError) -> bool:
    """Whether the attempt ended unsent: the limiter passed it over (the deployment at its
    rate limit, or cooling in the shared store) while another deployment was ready."""
    return bool(getattr(stream, "_held_back", False))


def _started(sent_at: float) -> float:
    """The Unix time an attempt was sent, from its `time.monotonic()`."""
    return time.time() - (time.monotonic() - sent_at)


def _key(stream: Any) -> str | None:
    """The attempt's limit key when a shared store holds the cooldowns, else None."""
    key: str | None = getattr(stream, "_limit_key", None)
    if key is None or limiter.config.store is limiter.config.local:
        return None
    return key


def failed(rs: RouteStream, d: Deployment, error: StreamError, content: bool) -> None:
    """Record `d`'s failed attempt and, for a cooling kind, cool it here (the store write
    to make left in `rs._share`); passed over unsent by the limiter, it is recorded not
    sent and only held back for the wait the limiter said."""
    sent = not passed_over(rs._current, error)
    retry_after = error.retry_after
    rs._attempts.append(
        attempt(d, error.kind, error.status_code, retry_after, sent, content, rs._sent_at)
    )
    if error.kind not in COOLING:
        return
    route = rs._route
    if not sent:
        route.hold(d, retry_after or 0.0)
        return
    d.failed += 1
    route.note(d, ok=False)
    if route.blip(d, error.kind, retry_after):
        return  # one failure among many answers: not cooled, here or in the store
    route.cool(d, error.kind, retry_after, rs._began)
    key = _key(rs._current)
    if key is None:
        return
    wait = route.fixed_wait(error.kind, retry_after)
    change: dict[str, Any] = {"started": _started(rs._sent_at)}
    if wait is None:
        change["until"] = 0.0
        change["backoff"] = (route.cooldown, route.max_cooldown)
    else:
        change["until"] = time.time() + wait
    rs._share = d, key, change, False


def served(rs: RouteStream, d: Deployment, message: AssistantMessage, content: bool) -> None:
    """Record that `d` served the call, count it (and the call's first choice passed over
    if it was cooling here), forget `d`'s failures in a row, and leave in `rs._share` the
    store write that forgets them there too (only when the store may hold some)."""
    rs._attempts.append(attempt(d, None, None, None, True, content, rs._sent_at))
    first = rs._first
    if first is not d and first in rs._plan:
        first.passed_over += 1  # cooling here: the call went past it unsent
    session = rs._options.session_id
    fallback = first is not d
    key = None
    change: dict[str, Any] = {}
    if rs._route.served(d, message.ttft_ms, session, started=rs._began, fallback=fallback):
        key = _key(rs._current)
        change = {"until": 0.0, "started": _started(rs._sent_at), "reset": True}
    count = primary.counts_shared()
    if key is not None or count:
        rs._share = d, key, change, count


async def share(route: Route, pending: Pending) -> None:
    """Make the store write and take back what the store knows: its failures in a row
    and its deadline (for a failure, the store's deadline replaces this process's)."""
    d, key, change, count = pending
    if count:
        # A report, not a decision: written on a task of its own, never in the call's way
        # nor ahead of the cooldown write below.
        _spawn_detached(lambda: primary.tally_served(route, d))
    if key is None:
        return
    found = await limiter.share_cool(key, **change)
    if found is None:
        return
    until, strikes = found
    d.strikes = strikes
    d.shared = strikes > 0
    left = min(max(until - time.time(), 0.0), max(route.max_cooldown, route.long_cooldown))
    if change.get("reset"):
        d.cool_until = max(d.cool_until, route.clock() + left)
    else:
        # The store's deadline, not this process's guess from a streak it may not have
        # heard the end of (a failure that was not a rate limit: its fault's deadline).
        fault = d.fault_until > route.clock()
        d.cool_until = route.clock() + left
        if fault:
            d.fault_until = d.cool_until


def attempt(
    d: Deployment,
    kind: ErrorKind | None,
    status: int | None,
    retry_after: float | None,
    sent: bool,
    content: bool,
    sent_at: float,
) -> Attempt:
    """The record of one deployment tried (`ms`: 0 when it was not sent)."""
    return Attempt(
        provider=d.model.provider,
        model=d.model.id,
        host=d.host,
        kind=kind,
        status_code=status,
        retry_after=retry_after,
        ms=round((time.monotonic() - sent_at) * 1000, 3) if sent else 0.0,
        content_started=content,
        sent=sent,
    )


def cooling_error(wait: float, attempts: list[Attempt]) -> StreamError:
    """The end of a call whose deployments all cool past what it may wait."""
    return StreamError(
        kind="rate_limit",
        message=f"every deployment of the route is cooling down; the first is ready "
        f"in {wait:.1f} s ({summary(attempts)})",
        retryable=True,
        retry_after=wait,
    )


def summary(attempts: list[Attempt]) -> str:
    tried = [
        f"{a.provider} {a.model}: {a.kind or 'served'}{'' if a.sent else ' (not sent)'}"
        for a in attempts
    ]
    return "route tried " + ("; ".join(tried) if tried else "no deployment")
