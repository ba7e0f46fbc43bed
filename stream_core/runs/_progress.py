"""A run's progress across workers: each worker adds its results to named tallies in the
limiter's store (`configure_limits(store=...)`), and any process reads them back as one
view and one line."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from stream_core import AssistantMessage, tallies, tally

__all__ = ["Progress", "ProgressView", "format_eta", "format_rate", "format_usd"]

# Times are kept per worker (a tally only adds): each `Progress` adds its first time once
# to its own `first:<id>` field, and to its own `latest:<id>` the time since the last it
# wrote there, so that field holds its latest time. The run's are the least and the most.
_FIRST = "first:"
_LATEST = "latest:"
_FAILED = "failed_"
_TOKENS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class ProgressView:
    """Where a run is, as every worker sharing the store counted it.

    `done` counts every result added (`failed` of them with an error, by kind in
    `failed_kinds`); `usd` is the priced ones' cost (`unpriced`: results with no known
    cost); `tokens` by `Usage` field. `first_at` and `latest_at` are the times (Unix
    seconds) of the first and the latest result any worker added, as the store kept them;
    `rate` is results per second between them and `eta` the seconds the rest would take
    at that rate after the latest result (None while unknown: fewer than two results, or
    no `total`)."""

    name: str
    total: int | None
    done: int = 0
    failed: int = 0
    failed_kinds: dict[str, int] = field(default_factory=dict)
    usd: float = 0.0
    unpriced: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    first_at: float | None = None
    latest_at: float | None = None
    rate: float | None = None
    eta: float | None = None


def _int(value: float) -> int:
    return int(value) if math.isfinite(value) else 0


def _deltas(message: AssistantMessage) -> dict[str, float]:
    u = message.usage
    deltas: dict[str, float] = {"done": 1.0}
    if message.error is not None:
        deltas["failed"] = 1.0
        deltas[_FAILED + message.error.kind] = 1.0
    if u.cost is None:
        deltas["unpriced"] = 1.0
    elif u.cost.total:
        deltas["usd"] = u.cost.total
    for name in _TOKENS:
        if getattr(u, name):
            deltas[name] = float(getattr(u, name))
    return deltas


def _message(item: object) -> AssistantMessage:
    if isinstance(item, AssistantMessage):
        return item
    message = getattr(item, "message", None)
    if isinstance(message, AssistantMessage):
        return message  # a ResultRow, a BatchResult
    raise TypeError(
        f"Progress.add takes an AssistantMessage (or a row holding one), not {type(item).__name__}"
    )


class Progress:
    """A run's shared counter, named, with the number of results it expects (None:
    unknown, no ETA).

        configure_limits(store="redis://127.0.0.1:6379/0")  # or a file path
        progress = Progress("eval-7", total=2000)
        ...
        await progress.add(message)             # in every worker, once per result
        print(progress.line(await progress.read()))

    The counts live in the limiter's store (`tally`, `tallies`), so every process naming
    the same store and `name` adds to and reads the same run (the in-process store: this
    process only). Make one `Progress` per worker and run: each keeps the time of its
    first and latest result in the tally, and the view's rate and ETA are from the
    earliest and the latest of every worker's (`clock`, Unix seconds, is `time.time`).
    `add` never raises for a shared store that is down (the limiter's rule: the count is
    kept in this process, and does not reach the shared view); `read` of a shared store
    that cannot be reached raises `ConnectionError`. A name is 1 to 200 printable
    characters.
    """

    def __init__(
        self, name: str, total: int | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a progress name is a non-empty string")
        if total is not None and (isinstance(total, bool) or not isinstance(total, int)):
            raise TypeError(f"total is an int or None, not {type(total).__name__}")
        if total is not None and total < 0:
            raise ValueError(f"total must be 0 or more, not {total}")
        self.name = name
        self.total = total
        self.clock = clock
        self._id = uuid.uuid4().hex[:12]
        self._latest: float | None = None

    async def add(self, result: object) -> None:
        """Count one result: an `AssistantMessage`, a `ResultRow` or a `BatchResult`."""
        deltas = _deltas(_message(result))
        now = self.clock()
        if self._latest is None:
            deltas[_FIRST + self._id] = now
            deltas[_LATEST + self._id] = now
        else:
            deltas[_LATEST + self._id] = now - self._latest
        self._latest = now
        await tally(self.name, **deltas)

    async def read(self) -> ProgressView:
        """The run as every worker counted it so far."""
        return view(self.name, self.total, await tallies(self.name))

    def line(self, view: ProgressView) -> str:
        """One line: `1,204/2,000 done · 9 failed · $0.23 · 41.2/s · ETA 19s`."""
        return line(view)

    def __repr__(self) -> str:
        return f"Progress({self.name!r}, total={self.total!r})"


def view(name: str, total: int | None, t: dict[str, float]) -> ProgressView:
    """The view of a run's tallies `t`."""
    done = _int(t.get("done", 0.0))
    firsts = [v for k, v in t.items() if k.startswith(_FIRST) and math.isfinite(v) and v > 0]
    latests = [v for k, v in t.items() if k.startswith(_LATEST) and math.isfinite(v) and v > 0]
    first = min(firsts) if firsts else None
    latest = max(latests) if latests else None
    rate = None
    if first is not None and latest is not None and done >= 2 and latest > first:
        rate = (done - 1) / (latest - first)  # the first result starts the clock
    eta = None
    if total is not None:
        if done >= total:
            eta = 0.0
        elif rate:
            eta = (total - done) / rate
    usd = t.get("usd", 0.0)
    return ProgressView(
        name=name,
        total=total,
        done=done,
        failed=_int(t.get("failed", 0.0)),
        failed_kinds={
            k[len(_FAILED) :]: _int(v) for k, v in sorted(t.items()) if k.startswith(_FAILED)
        },
        usd=usd if math.isfinite(usd) else 0.0,
        unpriced=_int(t.get("unpriced", 0.0)),
        tokens={k: _int(t[k]) for k in _TOKENS if k in t},
        first_at=first,
        latest_at=latest,
        rate=rate,
        eta=eta,
    )


def format_usd(usd: float) -> str:
    """`$0`, `$0.0042`, `$0.23`, `$1,204.50`."""
    if usd <= 0:
        return "$0"
    if usd < 0.01:
        return f"${usd:.2g}"
    return f"${usd:,.2f}"


def format_rate(rate: float) -> str:
    """`41.2/s`; under 0.1 a second, per minute (`3.0/min`); under 0.1 a minute, per hour
    (`0.042/h`)."""
    if rate >= 0.1:
        return f"{rate:,.1f}/s"
    if rate * 60 >= 0.1:
        return f"{rate * 60:,.1f}/min"
    return f"{rate * 3600:.2g}/h"


def format_eta(seconds: float) -> str:
    """`19s`, `4m05s`, `2h03m`, `3d04h` (to the nearest second)."""
    s = max(0, round(seconds)) if math.isfinite(seconds) else 0
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def line(v: ProgressView) -> str:
    """`1,204/2,000 done · 9 failed · $0.23 · 41.2/s · ETA 19s`: the total, rate and ETA
    are left out while unknown; ` (+N unpriced)` follows the spend when some results had
    no known cost."""
    parts = [f"{v.done:,}/{v.total:,} done" if v.total is not None else f"{v.done:,} done"]
    parts.append(f"{v.failed:,} failed")
    parts.append(format_usd(v.usd) + (f" (+{v.unpriced:,} unpriced)" if v.unpriced else ""))
    if v.rate is not None:
        parts.append(format_rate(v.rate))
    if v.eta is not None and v.total is not None and v.done < v.total:
        parts.append(f"ETA {format_eta(v.eta)}")
    return " · ".join(parts)
