"""What a Redis limit store holds, read for `inspect_limits`: every key under the store's
prefix (SCAN, never KEYS), each read as the scripts would read it. Read only: nothing is
written, no reservation is given back here (the next admission does that)."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from . import window
from .redis_scripts import SPEND

if TYPE_CHECKING:
    from .redis_store import RedisStore

__all__ = ["glob", "read_contents", "spend"]

_MAX_STATE = 1 << 20
"""Bytes: a key's state is a few hundred; a longer one is not read."""

_MAX_HELD = 10_000
"""The most reservations read per budget."""


def glob(text: str) -> str:
    """`text` matched literally in a SCAN pattern."""
    return re.sub(r"([*?\\[\]])", r"\\\1", text)


def spend(raw: Any, longest: int = 64) -> float:
    """A spend (or a tally's field, `longest` 512) as kept: anything but a plain decimal
    number is 0, as the scripts read it (`spent`)."""
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw or "")
    found = float(text) if len(text) < longest and SPEND.fullmatch(text) else 0.0
    return found if window.number(found) else 0.0


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


async def _now(store: RedisStore) -> float:
    if not store.server_time:
        return time.time()
    found = await store._call("time")
    try:
        return float(found[0]) + float(found[1]) / 1_000_000
    except (TypeError, ValueError, IndexError):
        return time.time()


async def read_contents(store: RedisStore) -> dict[str, Any]:
    """`LimitStore.contents` of `store` (see there)."""
    prefix = store.prefix
    head = len(prefix) + 1
    parts: dict[str, list[str]] = {"k": [], "b": [], "r": [], "t": []}
    for key in await store._scan(f"{glob(prefix)}:*"):
        kind, sep = key[head : head + 1], key[head + 1 : head + 2]
        if sep == ":" and kind in parts:
            parts[kind].append(key[head + 2 :])
    now = await _now(store)
    keys: dict[str, Any] = {}
    names = parts["k"]
    for i in range(0, len(names), 500):
        batch = names[i : i + 500]
        for name, raw in zip(batch, await store._get([store._key(n) for n in batch]), strict=True):
            if raw is None or len(raw) > _MAX_STATE:
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                keys[name] = entry
    budgets: dict[str, float] = {}
    spent_of = parts["b"]
    for i in range(0, len(spent_of), 500):
        batch = spent_of[i : i + 500]
        found = await store._get([f"{prefix}:b:{n}" for n in batch])
        for name, raw in zip(batch, found, strict=True):
            budgets[name] = max(spend(raw), 0.0)
    held: dict[str, Any] = {}
    for name in parts["r"]:
        try:
            members = await store._call(
                "zrange", f"{prefix}:r:{name}", 0, _MAX_HELD - 1, withscores=True
            )
        except Exception:  # not a sorted set: the next admission starts it over
            continue
        mine: dict[str, list[float]] = {}
        for member, score in members:
            rid = _text(member)
            try:
                amount = float(rid.rpartition("|")[2])
            except ValueError:
                continue
            if not (window.number(amount) and window.number(score)):
                continue
            if score > now:
                mine[rid] = [amount, float(score)]
            elif amount > 0 and name in budgets:  # given back at the next admission
                budgets[name] = max(budgets[name] - amount, 0.0)
        if mine:
            held[name] = mine
            budgets.setdefault(name, 0.0)
    return {"now": now, "keys": keys, "budgets": budgets, "held": held, "tallies": parts["t"]}
