"""The admission step: before each attempt is sent, the limiter (`_limits.limiter`) admits
it, or says how long to wait, or ends it at once (a budget it cannot fit, a wait past the
call's limits); when the attempt ends, what it reserved is settled against what it used.

A call reserves one request, its estimated input plus `max_tokens` of tokens (the estimate
made only once the key is known to have a token limit) and, under a budget, its worst-case
cost. Waiting counts against `total_timeout` and `max_retry_delay`; a `Route`'s attempt
is not kept waiting while another deployment is ready: it ends `rate_limit` at once and the
route moves on.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio

from .._cost import compute_cost
from .._errors import StreamFailure
from .._limits import limiter
from .._limits.flow import GROW_EVERY, Flow
from .._limits.window import RESERVATION_TTL
from .._transport import run_soon
from .._types import StreamError, Usage
from .state import CallState

__all__ = ["Admission"]

_TOKEN_LIMITS = frozenset({"tokens", "input_tokens", "output_tokens"})


class Admission(CallState):
    """The admission stage of `AssistantStream`."""

    __slots__ = ()

    def _check_budget(self) -> None:
        """A budget name no `configure_limits(budgets=...)` set: the caller's mistake,
        raised at `stream()`."""
        name = self._options.budget
        if name is not None and name not in limiter.config.budgets:
            known = ", ".join(sorted(limiter.config.budgets)) or "none are configured"
            raise ValueError(
                f"StreamOptions.budget: no budget named {name!r} "
                f"(configure_limits(budgets=...) names them; {known})"
            )

    def _key_parts(self) -> tuple[str, str, str | None, str]:
        """What the limit key is made of: the provider, the endpoint, the credential (only
        ever hashed into the key) and the model.
        A token the wire fetched that names its `principal` (Vertex AI's OAuth token) is
        never the credential: it changes at every refresh, so the key is whom it was
        issued to, at the endpoint the request names (project and location filled in)."""
        secret: str | None = self._secrets[0] if self._secrets else None
        model = self._model  # its base_url is the one sent (`options.base_url` applied)
        where = model.base_url
        principal = next(
            (p for t in self._secrets if isinstance(p := getattr(t, "principal", None), str)),
            None,
        )
        if principal is not None:
            secret = f"principal:{principal}"
            if self._request is not None and "{" in where:
                where = str(self._request.url.copy_with(query=None))
        return model.provider, where, secret, model.id

    async def _key(self) -> str:
        """The limit key (`limiter.limit_key`); a credential's first hash (a slow one, by
        design) is worked out in a worker thread, never on the event loop."""
        parts = self._key_parts()
        key = limiter.known_key(parts)
        if key is None:
            key = await anyio.to_thread.run_sync(limiter.limit_key, *parts)
        self._limit_key = key
        return key

    async def _admit(self) -> None:
        """Wait until the limiter admits this attempt (`_ticket` set), or fail it."""
        cfg = limiter.config
        if not cfg.enabled or not self._wire.rate_limited:
            return
        key = self._limit_key or await self._key()
        flow = limiter.flow(key)
        opts = self._options
        max_out = opts.max_tokens or self._model.max_tokens or 0
        budgeted = cfg.budget_usd is not None or opts.budget is not None
        estimate = raw = 0
        if (
            flow.token_limits
            or budgeted
            or opts.max_cost_usd is not None
            or (cfg.store is not cfg.local)
        ):
            from .._history.tokens import estimate_context_tokens  # its regexes: when needed

            raw = estimate_context_tokens(self._context)
            estimate = flow.corrected(raw)  # by what this key's vendor counted before
        needs = _needs(estimate, max_out)
        asks = self._budget_asks(estimate, max_out, budgeted)
        # Every wait of this attempt, all told (for a slot, a limit, or a shared budget's
        # store): a token limit's short looks add up to no more than `max_retry_delay`.
        until = time.monotonic() + opts.max_retry_delay
        scale = flow.scale
        while True:
            if raw and flow.scale != scale:  # a call that settled meanwhile taught it
                scale = flow.scale
                estimate = flow.corrected(raw)
                needs = _needs(estimate, max_out)
            if flow.full(time.monotonic()):
                await self._wait_slot(flow, until)
                continue
            wait, ticket, short = await limiter.admit(key, needs, asks, self._pass_over)
            if short is not None and short[1] is None:
                await self._wait_store(short[0], until)
                continue
            if short is not None:
                raise StreamFailure(self._budget_error(short, asks, estimate, max_out))
            if ticket is not None:
                flow.in_flight += 1
                ticket.estimate = raw
                ticket.cuts = flow.cuts
                self._ticket = ticket
                return
            await self._wait_admission(wait, until)

    async def _wait_store(self, name: str, until: float) -> None:
        """The shared store keeping budget `name` cannot be reached: wait for it to answer
        again, within `max_retry_delay` and the call's deadline, or end `budget` unsent."""
        wait = limiter.STORE_RETRY
        late = time.monotonic() + wait > until
        if not late and self._deadline is not None:
            late = anyio.current_time() + wait >= self._deadline
        if late or self._pass_over:
            self._held_back = self._pass_over
            what = "budget_usd" if name == limiter.GLOBAL_BUDGET else repr(name)
            raise StreamFailure(
                StreamError(
                    kind="budget",
                    message=f"budget {what} is kept in the shared limit store, which "
                    "cannot be reached; a budget is never spent where its store cannot "
                    "count it, so nothing was sent",
                    retry_after=wait,
                )
            )
        await self._interruptible(anyio.sleep(wait), None)

    async def _wait_slot(self, flow: Flow, until: float) -> None:
        """Wait for one of the key's concurrency slots (capped after a 429): woken when a
        call gives one back or the cap grows, within `max_retry_delay` in all."""
        left = until - time.monotonic()
        cap = flow.limit or 1
        if self._pass_over or left <= 0:
            self._held_back = self._pass_over
            what = (
                "passed over"
                if self._pass_over
                else (f"waited past max_retry_delay={self._options.max_retry_delay}s")
            )
            raise _rate_limited(
                GROW_EVERY,
                f"{self._model.id}: all {cap:.0f} of its concurrency slots (capped after a "
                f"429 with no rate-limit headers) are taken; {what}, nothing was sent",
            )
        await self._interruptible(flow.wait(left), None)

    def _budget_asks(self, estimate: int, max_out: int, budgeted: bool) -> list[list[Any]]:
        cap = self._options.max_cost_usd
        if not budgeted and cap is None:
            return []
        worst = self._worst_cost(estimate, max_out)
        if worst is None:
            m = self._model
            raise StreamFailure(
                StreamError(
                    kind="budget",
                    message=f"{m.provider}/{m.id} has no prices, so a budget cannot bound "
                    "its cost; nothing was sent (give the model prices, or call it without "
                    "a budget)",
                )
            )
        if cap is not None and worst > cap:
            raise StreamFailure(
                self._budget_error(["max_cost_usd", cap], [], estimate, max_out, worst)
            )
        cfg = limiter.config
        # Each reservation is held until settled, or given back after `ttl` (its worker
        # killed mid-call): the call's own time limit and a minute, else an hour.
        total = self._options.total_timeout
        ttl = RESERVATION_TTL if total is None else min(RESERVATION_TTL, total + 60.0)
        rid = f"{uuid.uuid4().hex}|{worst!r}"
        asks: list[list[Any]] = []
        if cfg.budget_usd is not None:
            asks.append([limiter.GLOBAL_BUDGET, cfg.budget_usd, worst, rid, ttl])
        name = self._options.budget
        if name is not None:
            asks.append([name, cfg.budgets[name], worst, rid, ttl])
        return asks

    def _worst_cost(self, estimate: int, max_out: int) -> float | None:
        """The most this call may cost: the estimate as input or as cache writes (dearer
        where caching is on), whichever is more, and `max_tokens` of output."""
        worst = compute_cost(self._model, Usage(input=estimate, output=max_out), self._pricing)
        if worst is None:
            return None
        writes = compute_cost(
            self._model, Usage(cache_write=estimate, output=max_out), self._pricing
        )
        return worst.total if writes is None else max(worst.total, writes.total)

    def _budget_error(
        self,
        short: list[Any],
        asks: list[list[Any]],
        estimate: int,
        max_out: int,
        worst: float | None = None,
    ) -> StreamError:
        name, left = short[0], short[1]
        if worst is None:
            worst = next(a[2] for a in asks if a[0] == name)
        what = "this call's max_cost_usd" if name == "max_cost_usd" else f"budget {name!r}"
        has = "allows" if name == "max_cost_usd" else "has"
        return StreamError(
            kind="budget",
            message=f"{what} {has} {max(left, 0.0):.6f} USD left; this call may cost up to "
            f"{worst:.6f} USD ({self._model.id}: about {estimate:,} input tokens and "
            f"max_tokens={max_out:,}); nothing was sent",
        )

    async def _wait_admission(self, wait: float, until: float) -> None:
        """Wait `wait` seconds for the key's limits, unless that ends past `until` (the
        attempt's `max_retry_delay`, all its waits told) or its deadline."""
        opts = self._options
        if self._pass_over:
            self._held_back = True
            raise _rate_limited(
                wait,
                f"{self._model.id} is at its rate limit or cooling down (ready in "
                f"{wait:.2f}s); passed over, nothing was sent",
            )
        if wait > opts.max_retry_delay:
            raise _rate_limited(
                wait,
                f"rate limit reached for {self._model.id}: the call fits in {wait:.1f}s, "
                f"past max_retry_delay={opts.max_retry_delay}s; nothing was sent",
            )
        if time.monotonic() + wait > until:
            raise _rate_limited(
                wait,
                f"rate limit reached for {self._model.id}: still no room after waiting "
                f"max_retry_delay={opts.max_retry_delay}s in all; nothing was sent",
            )
        if self._deadline is not None and anyio.current_time() + wait >= self._deadline:
            raise StreamFailure(
                StreamError(
                    kind="timeout",
                    message=f"the call fits its rate limit in {wait:.1f}s, past "
                    f"total_timeout={opts.total_timeout}s; nothing was sent",
                )
            )
        await self._interruptible(anyio.sleep(wait), None)

    async def _settle(self, error: StreamError | None) -> None:
        """Settle the attempt's reservation against what it used; never raises."""
        ticket = self._ticket
        if ticket is None:
            return
        self._ticket = None
        self._close_ticket(ticket, error, adapt=True)
        try:
            await limiter.settle(ticket)
        except Exception:  # pragma: no cover - settle never raises; a bug must not either
            pass

    def _abandon_ticket(self) -> None:
        """From `__del__`: a stream dropped unfinished and never closed gives its slot
        back, and what it reserved is settled: at once in this process's store, on the
        stream's event loop for a shared one (else it lapses at the limit's reset). What
        the vendor may have counted stays reserved; no concurrency is learned."""
        ticket = self._ticket
        if ticket is None:
            return
        self._ticket = None
        self._close_ticket(ticket, None, adapt=False)
        if not limiter.settle_local(ticket):
            run_soon(lambda: limiter.settle(ticket), self._loop)

    def _close_ticket(self, ticket: limiter.Ticket, error: StreamError | None, adapt: bool) -> None:
        """Give the attempt's slot back (and, when `adapt`, learn concurrency from how it
        ended); fill in what it used, the pause a 429 asks for (at most `max_pause` and
        the call's `max_retry_delay`), whether the vendor answered normally (which lifts
        an earlier 429's pause), and each budget's settlement."""
        flow = limiter.flow(ticket.key)
        flow.release()
        usage = self.message.usage
        counted = usage.input or usage.output or usage.cache_read or usage.cache_write
        if counted and ticket.answered and ticket.estimate:
            flow.learn(ticket.estimate, usage.input + usage.cache_read + usage.cache_write)
        if ticket.answered:
            ticket.answered_ago = ticket.since_answered()
        if not ticket.answered:
            ticket.used = {"requests": 1}  # refused or failed before an answer: no tokens
        elif counted:
            reads = limiter.COUNTS_CACHE_READS.get(self._wire.api, True)
            taken = usage.input + usage.cache_write + (usage.cache_read if reads else 0)
            ticket.used = {
                "requests": 1,
                "tokens": taken + usage.output,
                "input_tokens": taken,
                "output_tokens": usage.output,
            }
        else:
            ticket.used = ticket.needs  # answered with no usage: the reservation stands
        limited = error is not None and error.kind == "rate_limit" and error.status_code == 429
        if limited and error is not None and error.retry_after is not None:
            # A 429's `retry_after` is its Retry-After, or else the reset of the limit its
            # headers report used up (`http.error_of`): the key pauses until then, within
            # bounds (a `Retry-After: 1000000000` is not a pause of 31 years).
            bound = min(limiter.config.max_pause, self._options.max_retry_delay)
            ticket.pause_until = time.time() + min(max(error.retry_after, 0.0), bound)
        if ticket.report:
            flow.lift()
            if any(r[0] in _TOKEN_LIMITS for r in ticket.report):
                flow.token_limits = True
        elif adapt:
            if limited:
                flow.cut(ticket.cuts)
            elif error is None:
                flow.success(ticket.cuts)
        if ticket.asks:
            cost = usage.cost
            for name, _, worst, rid, _ in ticket.asks:
                if not ticket.answered:
                    actual = 0.0
                elif counted and cost is not None:
                    actual = cost.total
                else:
                    actual = worst
                ticket.settles.append([name, worst, actual, rid])


def _needs(estimate: int, max_out: int) -> dict[str, int]:
    """What an attempt reserves: one request, its input estimate and `max_tokens`."""
    return {
        "requests": 1,
        "tokens": estimate + max_out,
        "input_tokens": estimate,
        "output_tokens": max_out,
    }


def _rate_limited(wait: float, message: str) -> StreamFailure:
    """An attempt that will not wait `wait` seconds for its limit: retryable after it."""
    return StreamFailure(
        StreamError(kind="rate_limit", retryable=True, retry_after=round(wait, 3), message=message)
    )
