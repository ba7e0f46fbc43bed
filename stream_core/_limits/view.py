"""`inspect_limits`'s answer: what a limit store holds, read back and made safe to show.

A limit key is (provider, base URL, a salted scrypt hash of the API key, model): no part
of a credential is in it, and what is shown is checked again (a base URL without userinfo
or credential values, a hash that is one), since a store may hold what another version
or another program wrote.
"""

from __future__ import annotations

import copy
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from . import redact, window
from .flow import Flow

__all__ = ["BudgetView", "KeyLimit", "KeyView", "LimitsView", "Reservation", "build"]

_DIGEST = re.compile(r"[0-9a-f]{24}|-")
"""What `redact.digest` makes (or `-`: no API key)."""


@dataclass(frozen=True)
class KeyLimit:
    """One limit a vendor reported for a key: `limit` in its window, `remaining` of it
    (what calls in flight reserved taken off), and when the window resets (Unix time)."""

    limit: float
    remaining: float
    resets_at: float | None


@dataclass(frozen=True)
class KeyView:
    """What the limiter holds for one limit key (provider, base URL, API key hash, model).
    Times are Unix times on the store's clock (`LimitsView.now`); None: none."""

    key: str
    provider: str
    base_url: str
    key_hash: str
    """The API key's salted scrypt hash (24 hex digits), `-` for none: never the key."""
    model: str
    limits: dict[str, KeyLimit] = field(default_factory=dict)
    """Learned from the vendor's rate-limit headers, by name (`requests`, `tokens`...)."""
    paused_until: float | None = None
    """A 429's pause: every call on the key waits until then."""
    cooling_until: float | None = None
    """A route's cooldown: routes pass the deployment over until then."""
    failures: int = 0
    """A route deployment's failures in a row."""
    concurrency_cap: float | None = None
    """Calls in flight this process allows (learned from 429s with no rate-limit
    headers; this process only); None: open."""


@dataclass(frozen=True)
class Reservation:
    """A budget reservation not yet settled: its id, USD held, and when it is given back
    unless settled first (Unix time)."""

    id: str
    amount: float
    expires_at: float


@dataclass(frozen=True)
class BudgetView:
    """A budget: USD spent (reservations included), its cap as this process configured
    it (None: not configured here), and its reservations held."""

    name: str
    spent: float
    cap: float | None
    reservations: list[Reservation] = field(default_factory=list)


@dataclass(frozen=True)
class LimitsView:
    """What the limiter holds (`inspect_limits`): the store (named without a password),
    its clock, each limit key's state, each budget and the names of the tallies."""

    store: str
    now: float
    """The store's clock (Unix time) when read: the times shown are on it."""
    keys: list[KeyView] = field(default_factory=list)
    budgets: list[BudgetView] = field(default_factory=list)
    tallies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON-able data."""
        return asdict(self)


def _shown(text: str) -> str:
    return redact.scrubbed(text)


def _split(key: str) -> tuple[str, str, str, str]:
    """(provider, base URL, key hash, model) of a limit key, each safe to show."""
    provider, _, rest = key.partition("|")
    rest, _, model = rest.rpartition("|")
    base_url, _, digest = rest.rpartition("|")
    if not _DIGEST.fullmatch(digest):
        digest = "***"
    base_url = _shown(redact.shown_url(base_url))
    return _shown(provider), base_url, digest, _shown(model)


def _when(x: Any, now: float) -> float | None:
    return float(x) if window.number(x) and x > now else None


def _key_view(key: str, entry: Any, now: float, flow: Flow | None) -> KeyView:
    provider, base_url, digest, model = _split(key)
    entry = window.check(copy.deepcopy(entry), now) if entry is not None else None
    entry = entry or {}
    limits = {}
    for name, s in (entry.get("n") or {}).items():
        resets = s[2] if s[2] else None
        # A window whose reset has passed is whole again (as the next admission finds).
        left = s[0] if resets is not None and now >= resets + window.LATE else s[1]
        limits[_shown(str(name))] = KeyLimit(float(s[0]), float(left), _when(resets, now))
    row = entry.get("r")
    cap = None if flow is None else flow.limit
    return KeyView(
        key="|".join((provider, base_url, digest, model)),
        provider=provider,
        base_url=base_url,
        key_hash=digest,
        model=model,
        limits=limits,
        paused_until=_when(entry.get("p"), now),
        cooling_until=_when(entry.get("c"), now),
        failures=min(int(row), 64) if window.number(row) and row > 0 else 0,
        concurrency_cap=cap,
    )


def build(
    store: str,
    contents: dict[str, Any],
    caps: dict[str, float],
    flows: dict[str, Flow],
) -> LimitsView:
    """The view of a store's `contents` (`LimitStore.contents`), with the budget caps this
    process configured and its concurrency flows."""
    found: Any = contents.get("now")
    now = float(found) if window.number(found) else 0.0
    raw_keys = contents.get("keys")
    raw_keys = raw_keys if isinstance(raw_keys, dict) else {}
    keys = [
        _key_view(k, raw_keys.get(k), now, flows.get(k))
        for k in sorted({*raw_keys, *(k for k, f in flows.items() if f.limit is not None)})
        if isinstance(k, str)
    ]
    budgets_raw = contents.get("budgets")
    budgets_raw = budgets_raw if isinstance(budgets_raw, dict) else {}
    held = contents.get("held")
    held = held if isinstance(held, dict) else {}
    budgets = []
    for name in sorted({*budgets_raw, *held, *caps}):
        if not isinstance(name, str):
            continue
        spent = budgets_raw.get(name, 0.0)
        mine = held.get(name)
        reservations = [
            Reservation(_shown(rid.rpartition("|")[0] or rid), float(v[0]), float(v[1]))
            for rid, v in sorted((mine if isinstance(mine, dict) else {}).items())
            if isinstance(rid, str)
            and isinstance(v, list)
            and len(v) == 2
            and all(window.number(x) for x in v)
            and v[1] > now
        ]
        budgets.append(
            BudgetView(
                name=_shown(name),
                spent=float(spent) if window.number(spent) and spent > 0 else 0.0,
                cap=caps.get(name),
                reservations=reservations,
            )
        )
    tallies = contents.get("tallies")
    names = (
        sorted(_shown(t) for t in tallies if isinstance(t, str))
        if isinstance(tallies, list)
        else []
    )
    return LimitsView(store=_shown(store), now=now, keys=keys, budgets=budgets, tallies=names)
