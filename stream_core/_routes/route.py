"""A route: an ordered set of deployments one call may use, and what it learns from them
(cooldowns, calls in flight, time to first token, which session is where).

The trigger table (what a failure before the first content does) is data here; the stream
that walks a route is `_routes.stream`.
"""

from __future__ import annotations

import logging
import math
import time
import typing
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from .._models import Model
from .._usage import ErrorKind
from . import primary

__all__ = ["FALL_OVER", "LONG_COOLDOWN_KINDS", "Deployment", "Route", "RouteStrategy"]

logger = logging.getLogger("stream_core")

REPORT_EVERY = 60.0
"""Seconds (the route's clock) between looks at how many calls a fallback served: at most
one warning a window."""
REPORT_MIN = 10
"""Calls a window needs before its share of fallbacks is worth a warning."""
HEALTHY_MIN = 20
"""Attempts a deployment needs in the last minute or two before one failure among them
may be a blip (see `Route.blip`)."""
HEALTHY_SHARE = 0.1
"""The share of those attempts that may fail (this one included) for a failure to be a
blip."""
BLIP_KINDS: frozenset[ErrorKind] = frozenset({"overloaded", "server", "timeout", "network"})
"""Kinds whose failure, with no wait from the vendor, may be a blip of a healthy
deployment (a 429 means the key is at its limit; `auth` and `not_found` stay wrong)."""

RouteStrategy = Literal["order", "weighted", "least_busy", "fastest"]
"""How a `Route` orders its deployments for a call: `order` (priority), `weighted` (a
shuffle by weight), `least_busy` (fewest calls in flight), `fastest` (lowest recent time
to first token)."""
_STRATEGIES: tuple[str, ...] = typing.get_args(RouteStrategy)

FALL_OVER: frozenset[ErrorKind] = frozenset(
    {"rate_limit", "overloaded", "server", "timeout", "network", "auth", "not_found"}
)
"""Kinds that, before the first content, move the call to the next deployment."""
LONG_COOLDOWN_KINDS: frozenset[ErrorKind] = frozenset({"auth", "not_found"})
"""Kinds that take the deployment out for `Route.long_cooldown` (a key or a model that is
wrong stays wrong)."""
OPT_IN: frozenset[ErrorKind] = frozenset({"content_filter", "refusal"})
"""Kinds that fall over only with `Route(refusals_fall_over=True)`."""
COOLING: frozenset[ErrorKind] = FALL_OVER
"""Kinds that cool the deployment that failed with them, before content or after."""


class Deployment:
    """One model of a route and the route's knowledge of it (read-only to callers)."""

    __slots__ = (
        "began",
        "cool_until",
        "failed",
        "fault_until",
        "host",
        "in_flight",
        "index",
        "label",
        "model",
        "passed_over",
        "prior",
        "recent",
        "served",
        "shared",
        "strikes",
        "ttft",
        "weight",
    )

    def __init__(self, model: Model, weight: float, index: int) -> None:
        self.model = model
        self.weight = weight
        self.index = index
        self.host = host = urlsplit(model.base_url).hostname or model.base_url
        self.label = f"deployment {index + 1} ({model.provider} {model.id} at {host})"
        self.cool_until = 0.0
        """`time.monotonic()` before which the deployment is not sent anything."""
        self.fault_until = 0.0
        """The route's clock until which it cools for a failure that is not a rate limit
        (a 5xx, 529, timeout, auth, ...): a route with `wait_for_primary` does not wait
        for its primary then (`_routes.primary`)."""
        self.strikes = 0
        """Failures in a row: the default cooldown doubles with each (with a shared limit
        store, the store's count, as last heard)."""
        self.began: float | None = None
        """The route's clock when the last failure in a row was counted: an attempt sent
        before it failed or succeeded in the same burst, and changes no streak."""
        self.prior: float | None = None
        """When the failure before the last in a row was counted (the route's clock)."""
        self.shared = False
        """A shared limit store may hold failures in a row for it (one was heard of): the
        next success here resets them there."""
        self.in_flight = 0
        self.served = 0
        """Calls it served, since the route was made."""
        self.failed = 0
        """Attempts sent to it that failed."""
        self.passed_over = 0
        """Calls that went past it unsent while it was cooling or at its rate limit (the
        call's first choice, or an attempt the limiter passed over)."""
        self.ttft: float | None = None
        """Recent time to first token, milliseconds (a moving average)."""
        self.recent = [-math.inf, 0, 0, 0, 0]
        """Attempts sent to it and failures among them: [the route's clock when this
        minute began, attempts, failures, the same for the minute before]."""

    def __repr__(self) -> str:
        return f"<Deployment {self.label}>"


class Route:
    """One call over several deployments (each a `Model`: any API, any provider; the same
    model may appear on several base URLs or keys), accepted wherever a `Model` is:
    `stream`, `complete`, `stream_sync`, `complete_sync`.

    Before the first content, a failure of kind `rate_limit`, `overloaded`, `server`,
    `timeout` or `network` moves the call to the next deployment; `auth` and `not_found`
    also take the failing one out for `long_cooldown` seconds; `context_overflow` moves to
    the next deployment whose window fits (one whose `context_window` cannot hold the
    estimated request is skipped unsent); `content_filter` and `refusal` move on only with
    `refusals_fall_over`; anything else (a caller mistake) ends the call at once. After the
    first content nothing moves: the message ends with its error and its content, never
    spliced with another vendor's. See the routes guide for the whole table.

    `strategy` orders the deployments for each call: `order` (priority), `weighted` (a
    shuffle by `weights`), `least_busy` (fewest calls in flight) or `fastest` (lowest recent
    time to first token; unmeasured ones first). A call with `StreamOptions.session_id`
    goes back to the deployment that served the session (and holds its prompt cache) while
    that one is ready. With `wait_for_primary` (strategy `order` only) the first deployment
    is waited for while it is merely at its quota (its rate limit, a learned limit, a 429's
    pause within the call's `max_retry_delay`), never passed over for that; the call moves
    on only when it fails for real (see `_routes.primary`).

    A deployment that failed is cooled until the later of its current deadline and now
    plus the vendor's `retry_after` (at most `max_cooldown`; else `cooldown` seconds,
    doubling with each failure in a row up to `max_cooldown`); a deadline is never
    shortened, and is checked whenever a call would use the deployment. One failure of a
    deployment that answered nine in ten of its recent attempts (`blip`) cools nothing;
    its call still moves on. Attempts sent
    together that fail together (one burst) count as one failure in a row, and a success
    forgets them. The state lives in this object: share one `Route` among the calls that
    should learn from each other; with a shared limit store (`configure_limits(store=...)`)
    the cooldowns and the failures in a row are kept there too, for every process.

    What the route has done is counted (`stats()`, and each deployment's `served`, `failed`
    and `passed_over`; `served_counts()`, and with a shared store `shared_served()`
    for every process); when most of a minute's calls are served by a deployment other
    than their first choice, the route says so in the log (a warning, once a minute).
    """

    def __init__(
        self,
        deployments: Sequence[Model],
        *,
        strategy: RouteStrategy = "order",
        weights: Sequence[float] | None = None,
        refusals_fall_over: bool = False,
        cooldown: float = 5.0,
        max_cooldown: float = 300.0,
        long_cooldown: float = 600.0,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        wait_for_primary: bool = False,
        name: str | None = None,
    ) -> None:
        if isinstance(deployments, Model) or not isinstance(deployments, Sequence):
            raise TypeError("Route.deployments: give a list of stream_core.Model")
        if not deployments:
            raise ValueError("Route.deployments: give at least one Model")
        for i, model in enumerate(deployments):
            if not isinstance(model, Model):
                raise TypeError(
                    f"Route.deployments[{i}]: expected a stream_core.Model, "
                    f"got {type(model).__name__}"
                )
        if strategy not in _STRATEGIES:
            raise ValueError(f"Route.strategy: {strategy!r} is not one of {_STRATEGIES}")
        if weights is None:
            weights = [1.0] * len(deployments)
        if len(weights) != len(deployments):
            raise ValueError(
                f"Route.weights: {len(weights)} weights for {len(deployments)} deployments"
            )
        for i, w in enumerate(weights):
            if type(w) not in (int, float) or not math.isfinite(w) or w <= 0:
                raise ValueError(f"Route.weights[{i}]: expected a positive number, got {w!r}")
        for field, value in (
            ("cooldown", cooldown),
            ("max_cooldown", max_cooldown),
            ("long_cooldown", long_cooldown),
        ):
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"Route.{field}: expected seconds >= 0, got {value!r}")
        if type(max_sessions) is not int or max_sessions < 0:
            raise ValueError(f"Route.max_sessions: expected a count >= 0, got {max_sessions!r}")
        primary.check(strategy, wait_for_primary, name)
        self.deployments: tuple[Deployment, ...] = tuple(
            Deployment(m, float(w), i)
            for i, (m, w) in enumerate(zip(deployments, weights, strict=True))
        )
        self.largest_window = max(d.model.context_window for d in self.deployments)
        self.strategy: RouteStrategy = strategy
        self.refusals_fall_over = refusals_fall_over
        self.cooldown = float(cooldown)
        self.max_cooldown = float(max_cooldown)
        self.long_cooldown = float(long_cooldown)
        self.max_sessions = max_sessions
        self.clock = clock
        self.wait_for_primary = wait_for_primary
        self.name = name or primary.default_name(self.deployments)
        """What the route's counts are kept under in a shared store (`shared_served`)."""
        self._sessions: OrderedDict[str, int] = OrderedDict()
        self._random: Any = None  # a random.Random, made for the first weighted plan
        self.calls = 0
        """Calls this route served, since it was made."""
        self.fallback_calls = 0
        """Of those, calls served by a deployment other than their first choice."""
        self._window = [clock(), 0, 0]  # its start, calls served, by a fallback

    def __repr__(self) -> str:
        labels = ", ".join(d.label for d in self.deployments)
        return f"<Route {self.strategy}: {labels}>"

    # --- the order of one call ------------------------------------------------------------

    def plan(self, session_id: str | None = None) -> list[Deployment]:
        """The deployments in the order this call tries them (cooling ones included: each
        is checked when its turn comes)."""
        ds = self.deployments
        if len(ds) == 1:
            return [ds[0]]
        if self.strategy == "order":
            order = list(ds)
        elif self.strategy == "weighted":
            # Efraimidis-Spirakis: a weighted shuffle in one sort.
            if self._random is None:
                import random  # only a weighted route needs it

                self._random = random.Random()
            rnd = self._random.random
            order = sorted(ds, key=lambda d: rnd() ** (1.0 / d.weight), reverse=True)
        elif self.strategy == "least_busy":
            order = sorted(ds, key=lambda d: (d.in_flight, d.index))
        else:  # fastest: the unmeasured first, so each gets measured
            order = sorted(ds, key=lambda d: (d.ttft is not None, d.ttft or 0.0, d.index))
        if session_id is not None:
            held = self._sessions.get(session_id)
            if held is not None:
                self._sessions.move_to_end(session_id)
                d = ds[held]
                order.remove(d)
                order.insert(0, d)
        return order

    def ready_in(self, d: Deployment) -> float:
        """Seconds until `d` may be sent a call (0 when it may now)."""
        return max(0.0, d.cool_until - self.clock())

    # --- what a call teaches the route ----------------------------------------------------

    def fixed_wait(self, kind: ErrorKind, retry_after: float | None) -> float | None:
        """The seconds a failure of `kind` cools its deployment for, whatever its streak:
        `long_cooldown`, or the vendor's `retry_after` bounded by `max_cooldown`; None when
        the streak decides (`backoff`)."""
        if kind in LONG_COOLDOWN_KINDS:
            return self.long_cooldown
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.max_cooldown)
        return None

    def note(self, d: Deployment, ok: bool) -> None:
        """Count an attempt sent to `d` (`ok`: it answered) in its last minute's record."""
        now = self.clock()
        r = d.recent
        if now - r[0] >= REPORT_EVERY:
            last = now - r[0] < 2 * REPORT_EVERY
            d.recent = r = [now, 0, 0, r[1] if last else 0, r[2] if last else 0]
        r[1] += 1
        if not ok:
            r[2] += 1

    def blip(self, d: Deployment, kind: ErrorKind, retry_after: float | None) -> bool:
        """Whether a failure of `d` (already `note`d) is a blip of a healthy deployment, not
        a reason to cool it: a kind of `BLIP_KINDS` with no wait from the vendor, `d` not
        in a streak, and at least `HEALTHY_MIN` attempts in its last minute or two of which
        at most `HEALTHY_SHARE` failed. A fleet sending many calls to a deployment that
        answers 3% of them 529 keeps using it: each 529 cooling it for everyone would bench
        it most of the time. The call still moves to the next deployment."""
        if kind not in BLIP_KINDS or (retry_after is not None and retry_after > 0):
            return False
        if d.strikes or d.cool_until > self.clock():
            return False
        r = d.recent
        attempts, failures = r[1] + r[3], r[2] + r[4]
        return attempts >= HEALTHY_MIN and failures <= HEALTHY_SHARE * attempts

    def backoff(self, strikes: int) -> float:
        """The default cooldown after `strikes` failures in a row."""
        return min(self.max_cooldown, self.cooldown * 2.0 ** min(max(strikes, 1) - 1, 30))

    def cool(
        self,
        d: Deployment,
        kind: ErrorKind,
        retry_after: float | None,
        started: float | None = None,
    ) -> bool:
        """Take `d` out until the later of its deadline and now plus the wait this failure
        asks for (`fixed_wait`, else `backoff` from its last failure in a row); a deadline
        is never shortened. An attempt sent (`started`, the route's clock) before the last
        failure in a row was counted is of the same burst: it adds none. True when it
        added one."""
        now = self.clock()
        counted = started is None or d.began is None or started >= d.began
        if counted:
            d.strikes += 1
            d.prior, d.began = d.began, now
        wait = self.fixed_wait(kind, retry_after)
        if wait is not None:
            until = now + wait
        else:
            until = (now if d.began is None else d.began) + self.backoff(d.strikes)
        d.cool_until = max(d.cool_until, until)
        if kind != "rate_limit":
            d.fault_until = max(d.fault_until, until)
        return counted

    def hold(self, d: Deployment, wait: float) -> None:
        """`d` was passed over unsent (at its rate limit, or cooling in the shared store):
        not a failure, but skipped here for the `wait` it said (at most `max_cooldown`)."""
        d.passed_over += 1
        d.shared = True
        if wait > 0:
            d.cool_until = max(d.cool_until, self.clock() + min(wait, self.max_cooldown))

    def served(
        self,
        d: Deployment,
        ttft_ms: float | None,
        session_id: str | None,
        *,
        started: float | None = None,
        fallback: bool = False,
    ) -> bool:
        """`d` answered (a `fallback`: not the call's first choice): its failures in a row
        are forgotten (sent, `started`, before the last of them but after the one before,
        only the last is kept; before both, none is forgotten), its speed
        noted, and the session (if any) stays with it. True when a shared store may still
        hold failures in a row for it."""
        stale = False
        self.note(d, ok=True)
        if started is None or d.began is None or started >= d.began:
            stale = d.strikes > 0 or d.shared
            d.strikes = 0
            d.shared = False
        elif d.prior is not None and started >= d.prior and (d.strikes > 1 or d.shared):
            # Sent after the failure before the last, it answered: the last stands alone.
            stale = True
            d.strikes = min(d.strikes, 1)
        d.served += 1
        self._tally(fallback)
        if ttft_ms is not None:
            d.ttft = ttft_ms if d.ttft is None else 0.8 * d.ttft + 0.2 * ttft_ms
        if session_id is not None and self.max_sessions:
            self._sessions[session_id] = d.index
            self._sessions.move_to_end(session_id)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return stale

    # --- what the route has done ----------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """What the route has done since it was made: `calls` it served, how many of them
        a `fallback` served (a deployment other than the call's first choice), and per
        deployment (in order) its `label`, calls `served`, attempts `failed`, calls that
        `passed_over` it unsent (cooling or at its rate limit), `strikes` (failures in a
        row) and `cooling` (seconds until it is ready; 0: ready)."""
        return {
            "calls": self.calls,
            "fallback": self.fallback_calls,
            "deployments": [
                {
                    "label": d.label,
                    "served": d.served,
                    "failed": d.failed,
                    "passed_over": d.passed_over,
                    "strikes": d.strikes,
                    "cooling": self.ready_in(d),
                }
                for d in self.deployments
            ],
        }

    def served_counts(self) -> dict[str, int]:
        """Answers served by each deployment in this process, by label, in order (a
        fallback's answer counts for the fallback, never for the first choice)."""
        return {d.label: d.served for d in self.deployments}

    async def shared_served(self) -> dict[str, int] | None:
        """Answers served by each deployment in every process sharing the limit store
        (`configure_limits(store=...)`), under the route's `name`; None without one."""
        return await primary.shared_served(self)

    def _tally(self, fallback: bool) -> None:
        """Count a call served; at the end of a window, warn if fallbacks served most."""
        self.calls += 1
        window = self._window
        window[1] += 1
        if fallback:
            self.fallback_calls += 1
            window[2] += 1
        now = self.clock()
        if now - window[0] < REPORT_EVERY:
            return
        start, calls, fell = window
        self._window = [now, 0, 0]
        if calls >= REPORT_MIN and fell * 2 > calls:
            shown = "; ".join(
                f"{d.label}: served {d.served}, failed {d.failed}, passed over "
                f"{d.passed_over}"
                + (f", cooling {self.ready_in(d):.0f} s more" if self.ready_in(d) else "")
                for d in self.deployments
            )
            logger.warning(
                "route: %d of %d calls in the last %.0f s were served by a fallback, not "
                "their first choice (since the route was made: %s)",
                fell,
                calls,
                now - start,
                shown,
            )
