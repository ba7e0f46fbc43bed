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
from typing import Any

import anyio

from .._cost import compute_cost
from .._errors import StreamFailure
from .._limits import limiter
from .._limits.window import POLL
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

    def _key(self) -> str:
        """The limit key: the provider, the endpoint, a hash of the credential and the model.
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
        key = self._limit_key = limiter.limit_key(model.provider, where, secret, model.id)
        return key

    async def _admit(self) -> None:
        """Wait until the limiter admits this attempt (`_ticket` set), or fail it."""
        cfg = limiter.config
        if not cfg.enabled or not self._wire.rate_limited:
            return
        key = self._limit_key or self._key()
        flow = limiter.flow(key)
        opts = self._options
        max_out = opts.max_tokens or self._model.max_tokens or 0
        budgeted = cfg.budget_usd is not None or opts.budget is not None
        estimate = 0
        if (
            flow.token_limits
            or budgeted
            or opts.max_cost_usd is not None
            or (cfg.store is not cfg.local)
        ):
            from .._history.tokens import estimate_context_tokens  # its regexes: when needed

            estimate = estimate_context_tokens(self._context)
        needs = {
            "requests": 1,
            "tokens": estimate + max_out,
            "input_tokens": estimate,
            "output_tokens": max_out,
        }
        asks = self._budget_asks(estimate, max_out, budgeted)
        while True:
            if flow.limit is not None and flow.in_flight >= flow.limit:
                wait = POLL
            else:
                wait, ticket, short = await limiter.admit(key, needs, asks, self._pass_over)
                if short is not None:
                    raise StreamFailure(self._budget_error(short, asks, estimate, max_out))
                if ticket is not None:
                    flow.in_flight += 1
                    self._ticket = ticket
                    return
            await self._wait_admission(wait)

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
        asks: list[list[Any]] = []
        if cfg.budget_usd is not None:
            asks.append([limiter.GLOBAL_BUDGET, cfg.budget_usd, worst])
        name = self._options.budget
        if name is not None:
            asks.append([name, cfg.budgets[name], worst])
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

    async def _wait_admission(self, wait: float) -> None:
        opts = self._options
        if self._pass_over:
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
        ended); fill in what it used, the pause a 429 asks for, and each budget's
        settlement."""
        flow = limiter.flow(ticket.key)
        flow.in_flight -= 1
        usage = self.message.usage
        counted = usage.input or usage.output or usage.cache_read or usage.cache_write
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
            # headers report used up (`http.error_of`): the key pauses until then.
            ticket.pause_until = time.time() + error.retry_after
        if ticket.report:
            flow.learned = True
            flow.limit = None
            if any(r[0] in _TOKEN_LIMITS for r in ticket.report):
                flow.token_limits = True
        elif adapt:
            if limited and not flow.learned:
                flow.limit = max(1.0, (flow.limit or flow.in_flight + 1) / 2)
            elif error is None and flow.limit is not None:
                flow.limit += 1 / flow.limit
        if ticket.asks:
            cost = usage.cost
            for name, _, worst in ticket.asks:
                if not ticket.answered:
                    actual = 0.0
                elif counted and cost is not None:
                    actual = cost.total
                else:
                    actual = worst
                ticket.settles.append([name, worst, actual])


def _rate_limited(wait: float, message: str) -> StreamFailure:
    """An attempt that will not wait `wait` seconds for its limit: retryable after it."""
    return StreamFailure(
        StreamError(kind="rate_limit", retryable=True, retry_after=round(wait, 3), message=message)
    )
