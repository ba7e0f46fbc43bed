"""This process's own view of a key: the concurrency a 429 taught when the vendor sends
no rate-limit headers, the calls waiting for a slot, and how far the context estimate is
from the vendor's count.

After a 429 the cap is half the calls that were in flight (one 429 a round: the calls
sent before the cut do not cut again); it grows by one for each round of successes and
doubles every `GROW_EVERY` seconds without a 429, and is lifted past `LIFT_AT`: from one
call in flight back to open in under a minute, whatever the calls do meanwhile. A call
waiting for a slot sleeps until one is given back or the cap grows, never in a poll.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

import anyio

from .._transport import _loop_key

__all__ = ["GROW_EVERY", "LIFT_AT", "Flow"]

GROW_EVERY = 5.0
"""Seconds without a 429 after which a key's concurrency cap doubles."""

LIFT_AT = 512.0
"""A cap grown this far is lifted: the key is open again (eight doublings from 2: 40 s)."""

_SCALE_BOUNDS = (0.5, 4.0)
"""The correction to `estimate_context_tokens` a key can learn, as a factor."""


def _here() -> object | None:
    try:
        return _loop_key()
    except Exception:  # no event loop in this thread (a finalizer)
        return None


class Flow:
    """Calls in flight on a key in this process, the concurrency a 429 taught (None:
    open), and the factor the context estimate is off by (`scale`). The cap is gone once
    the vendor sends rate-limit headers, which say more."""

    __slots__ = (
        "cuts",
        "in_flight",
        "learned",
        "limit",
        "scale",
        "since",
        "token_limits",
        "waiters",
    )

    def __init__(self) -> None:
        self.in_flight = 0
        self.limit: float | None = None
        self.learned = False
        self.token_limits = False
        self.cuts = 0
        """429s that cut the cap: a call admitted before the last cut does not cut it."""
        self.since = 0.0
        """`time.monotonic()` of the last cut or doubling."""
        self.waiters: deque[tuple[anyio.Event, object | None]] = deque()
        self.scale = 1.0

    # --- the cap ------------------------------------------------------------------------

    def cap(self, now: float) -> float | None:
        """The cap at `now` (`time.monotonic()`), grown for the time since the last 429."""
        limit = self.limit
        if limit is None:
            return None
        if now - self.since >= GROW_EVERY:
            steps = int((now - self.since) // GROW_EVERY)
            limit *= 2.0 ** min(steps, 20)
            self.since += steps * GROW_EVERY
            self.limit = None if limit >= LIFT_AT else limit
            self.wake()
        return self.limit

    def full(self, now: float) -> bool:
        cap = self.cap(now)
        return cap is not None and self.in_flight >= cap

    def cut(self, cuts_at_admission: int) -> None:
        """A 429 with no rate-limit headers: halve the cap, once for the calls of a round."""
        if self.learned or cuts_at_admission != self.cuts:
            return
        self.limit = max(1.0, (self.limit or self.in_flight + 1) / 2)
        self.cuts += 1
        self.since = time.monotonic()

    def success(self, cuts_at_admission: int) -> None:
        """A call that ended well: one more slot a round of them (not for a call sent
        before the last cut: it says nothing of the cap since)."""
        if self.limit is not None and cuts_at_admission == self.cuts:
            self.limit += 1 / self.limit
            self.wake()

    def lift(self) -> None:
        """The vendor sent rate-limit headers: those limit the key, not this cap."""
        self.learned = True
        if self.limit is not None:
            self.limit = None
            self.wake()

    def reset(self) -> None:
        """Forget what was learned (`clear_limits`); the calls in flight stay counted."""
        self.limit = None
        self.learned = self.token_limits = False
        self.scale = 1.0
        self.wake()

    def release(self) -> None:
        """A call gave its slot back."""
        self.in_flight -= 1
        if self.waiters:
            self.wake()

    # --- waiting for a slot -------------------------------------------------------------

    def wake(self) -> None:
        """Wake as many waiters as there are free slots (all, once the key is open)."""
        free = math.inf if self.limit is None else self.limit - self.in_flight
        here = _here()
        while self.waiters and free > 0:
            event, loop = self.waiters.popleft()
            free -= 1
            if loop is here:
                event.set()
                continue
            try:  # a waiter on another event loop (another thread): set on its own loop
                call: Any = getattr(loop, "call_soon_threadsafe", None)
                call = call or loop.run_sync_soon  # type: ignore[union-attr]
                call(event.set)
            except Exception:  # its loop has ended: nobody waits there any more
                pass

    async def wait(self, timeout: float) -> None:
        """Sleep until a slot may be free, the cap grows, or `timeout` seconds pass."""
        grow = GROW_EVERY - (time.monotonic() - self.since)
        item: tuple[anyio.Event, Any] = (anyio.Event(), _here())
        self.waiters.append(item)
        woken = False
        try:
            with anyio.move_on_after(max(min(timeout, grow), 0.0)):
                await item[0].wait()
                woken = True
        finally:
            try:
                self.waiters.remove(item)
            except ValueError:  # woken: a slot was meant for this call
                if not woken:
                    self.wake()  # ... which ended without it: pass it on

    # --- the estimate -------------------------------------------------------------------

    def corrected(self, estimate: int) -> int:
        """The context `estimate` corrected by what this key's vendor counted before."""
        return estimate if self.scale == 1.0 else math.ceil(estimate * self.scale)

    def learn(self, estimate: int, counted: int) -> None:
        """A settled call: the vendor counted `counted` input tokens for an `estimate`."""
        if estimate <= 0 or counted <= 0:
            return
        low, high = _SCALE_BOUNDS
        ratio = min(max(counted / estimate, low), high)
        self.scale = ratio if self.scale == 1.0 else self.scale * 0.75 + ratio * 0.25
