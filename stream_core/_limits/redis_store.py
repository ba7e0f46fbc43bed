"""The limiter's state in Redis, for a fleet: one round trip to admit a call and one to
settle it, each a Lua script (atomic on the server, so a thousand workers never race).

The scripts (`redis_scripts`) are a port of `window` (same state, same JSON, same rules),
run on the state kept as one JSON string per key (`cjson`, which every Redis ships).
This module is the client side. redis-py's asyncio
client is used under asyncio; under trio, which it does not support, its blocking client
runs in a worker thread. Needs the `redis` extra (`pip install 'stream-core[redis]'`).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

import anyio

from .._transport import close_at_loop_end
from . import redact, window
from .redis_scripts import ADMIT, COOL, SETTLE, SPENT, TALLY
from .redis_view import glob as _glob
from .redis_view import read_contents
from .redis_view import spend as _spend
from .stores import LimitSettlement, LimitStore, TallyOverflow, checked_tally
from .window import LATE, Snapshot

__all__ = ["RedisStore"]

_MAX_REPLY = 65_536
"""Bytes: a script's answer is a few dozen; a longer one is not believed (nor parsed)."""


_SCRIPTS = (ADMIT, SETTLE, COOL, SPENT, TALLY)
"""Each client's scripts, in this order after it (`_run`'s `which` counts from 1)."""

_SCANNED = 100_000
"""The most keys `contents` reads: a store holding more is shown in part."""


def _reply(raw: Any) -> list[Any]:
    """A script's JSON answer, checked: [wait, snapshot, short budget or false]."""
    if not isinstance(raw, bytes | str) or len(raw) > _MAX_REPLY:
        raise ValueError("the store's answer is not one of the limiter's")
    found = json.loads(raw)
    if (
        not isinstance(found, list)
        or len(found) != 3
        or not window.number(found[0])
        or not isinstance(found[1], dict | list)
    ):
        raise ValueError("the store's answer is not one of the limiter's")
    found[0] = min(max(found[0], 0.0), window.bounds.max_pause + LATE)
    return found


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop; None under trio (or with none running)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _credentials(url: str) -> tuple[str, ...]:
    """The URL's username, password and credential query values, longest first."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found = [unquote(p) for p in parts.netloc.rpartition("@")[0].split(":") if p]
    found += [
        unquote_plus(value)
        for name, _, value in (pair.partition("=") for pair in parts.query.split("&"))
        if value and redact.is_credential(unquote_plus(name))
    ]
    return tuple(sorted(set(found), key=len, reverse=True))


class RedisStore(LimitStore):
    """`redis://...` (or `rediss://`, `unix://`): the limiter's state in Redis, shared by
    every process that names it; keys under `prefix`."""

    server_time = True
    """Times are the Redis server's (`TIME`): the callers' clocks may differ. False trusts
    each caller's `now` instead (tests that replay a table of times)."""

    def __init__(self, url: str, *, prefix: str = "stream_core", timeout: float = 0.25) -> None:
        try:
            import redis  # noqa: F401
        except ImportError:
            raise ImportError(
                "configure_limits(store='redis://...') needs redis-py: "
                "pip install 'stream-core[redis]'"
            ) from None
        self.url = url
        self.name = f"redis {redact.shown_url(url)}"  # no userinfo, no ?password=
        self.hidden = _credentials(url)
        """What the URL holds that no log line may show (see `limiter._shared`)."""
        self.prefix = prefix
        self.timeout = timeout
        self._clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._sync: Any = None
        self._lock = threading.Lock()

    # --- clients: one per asyncio loop, or a blocking one (trio) used from a thread -----

    def _options(self) -> dict[str, Any]:
        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "retry_on_timeout": False,
            "health_check_interval": 0,
        }

    def _async_client(self, loop: asyncio.AbstractEventLoop) -> Any:
        found = self._clients.get(loop)
        if found is None:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(self.url, **self._options())
            found = (
                client,
                *(client.register_script(x) for x in _SCRIPTS),
            )
            self._clients[loop] = found
            close_at_loop_end(client.aclose)  # a loop's client ends with its loop
        return found

    def _sync_client(self) -> Any:
        with self._lock:
            if self._sync is None:
                import redis

                client = redis.Redis.from_url(self.url, **self._options())
                self._sync = (
                    client,
                    *(client.register_script(x) for x in _SCRIPTS),
                )
            return self._sync

    async def _run(self, which: int, keys: list[str], args: list[Any]) -> Any:
        loop = _asyncio_loop()
        if loop is not None:
            script = self._async_client(loop)[which]
            return await script(keys=keys, args=args)
        script = self._sync_client()[which]
        # Abandoned at the store's timeout: a reply that never ends (or is 100 MB) keeps
        # its thread, never the call.
        return await anyio.to_thread.run_sync(
            lambda: script(keys=keys, args=args), abandon_on_cancel=True
        )

    async def _call(self, command: str, *args: Any, **options: Any) -> Any:
        """One redis-py client method, on this loop's client or (trio) in a thread."""
        loop = _asyncio_loop()
        if loop is not None:
            return await getattr(self._async_client(loop)[0], command)(*args, **options)
        method = getattr(self._sync_client()[0], command)
        return await anyio.to_thread.run_sync(
            lambda: method(*args, **options), abandon_on_cancel=True
        )

    async def _get(self, keys: list[str]) -> list[Any]:
        found: list[Any] = await self._call("mget", keys)
        return found

    async def _scan(self, pattern: str) -> list[str]:
        """The keys matching `pattern` (at most `_SCANNED`), as text."""
        found: list[str] = []
        cursor: Any = 0
        while True:
            cursor, batch = await self._call("scan", cursor, match=pattern, count=1000)
            found += [k.decode("utf-8", "replace") if isinstance(k, bytes) else k for k in batch]
            if not cursor or len(found) >= _SCANNED:
                return found[:_SCANNED]

    def _key(self, key: str) -> str:
        return f"{self.prefix}:k:{key}"

    def _budget_keys(self, name: str) -> list[str]:
        """A budget's spend, its reservations not yet settled (`r`: expiring) and the ids
        settled that are remembered (`s`)."""
        p = self.prefix
        return [f"{p}:b:{name}", f"{p}:r:{name}", f"{p}:s:{name}"]

    def _clock(self, now: float) -> str:
        return repr(now) if not self.server_time else ""

    # --- the store ----------------------------------------------------------------------

    async def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        keys = [self._key(key)]
        for a in asks:
            keys += self._budget_keys(a[0])
        args = [
            self._clock(now),
            repr(window.bounds.max_pause),
            json.dumps(needs),
            json.dumps(asks),
            "1" if route else "0",
        ]
        wait, snap, short = _reply(await self._run(1, keys, args))
        return float(wait), snap or {}, short or None

    async def settle(self, settlement: LimitSettlement, now: float) -> None:
        s = settlement
        if not (s.snap or s.report or s.pause_until or s.settles or s.answered_ago is not None):
            return
        keys = [self._key(s.key)]
        for b in s.settles:
            keys += self._budget_keys(b[0])
        # Times go as seconds from the caller's `now`: the script adds its own clock.
        report = [[n, limit, left, at - now if at else None] for n, limit, left, at in s.report]
        args = [
            self._clock(now),
            repr(window.bounds.max_pause),
            json.dumps(s.snap) if s.snap else "{}",
            json.dumps(s.used) if s.used else "{}",
            json.dumps(s.needs) if s.needs else "{}",
            json.dumps(report),
            repr(s.pause_until - now) if s.pause_until else "",
            json.dumps([b[1:] for b in s.settles]),
            "" if s.answered_ago is None else repr(max(s.answered_ago, 0.0)),
        ]
        await self._run(2, keys, args)

    async def cool(
        self,
        key: str,
        until: float,
        now: float | None = None,
        *,
        started: float | None = None,
        backoff: tuple[float, float] | None = None,
        reset: bool = False,
    ) -> tuple[float, int]:
        # Times go as seconds from the caller's `now`: the script adds its own clock.
        now = time.time() if now is None else now
        args = [
            self._clock(now),
            "" if started is None else repr(max(now - started, 0.0)),
            repr(until - now) if until and not reset else "",
            # How long ago it was sent, plus the most the script's clock may run ahead of
            # `now` (the round trip): an attempt sent that close to the last failure
            # counted is of its burst.
            "" if started is None else repr(max(now - started, 0.0) + self.timeout),
            "" if backoff is None else repr(backoff[0]),
            "" if backoff is None else repr(backoff[1]),
            "1" if reset else "0",
        ]
        raw = await self._run(3, [self._key(key)], args)
        found = json.loads(raw) if isinstance(raw, bytes | str) and len(raw) < 256 else None
        if not (
            isinstance(found, list)
            and len(found) == 2
            and all(isinstance(x, int | float) and math.isfinite(x) for x in found)
        ):
            raise ValueError("the store's answer is not one of the limiter's")
        left, row = found
        return (now + left if left > 0 else 0.0), max(int(row), 0)

    async def cooling(self, keys: list[str]) -> list[float]:
        found = await self._get([self._key(k) for k in keys])
        out = []
        for raw in found:
            try:
                out.append(float(json.loads(raw).get("c", 0.0)) if raw else 0.0)
            except (ValueError, AttributeError, TypeError):
                out.append(0.0)
        return out

    async def spent(self, name: str) -> float:
        args = [self._clock(time.time()), repr(window.bounds.max_pause)]
        raw = await self._run(4, self._budget_keys(name)[:2], args)
        return max(_spend(raw), 0.0)

    async def tally(self, name: str, deltas: Mapping[str, float], now: float) -> None:
        checked = checked_tally(name, deltas)
        if not checked:
            return
        args = [str(int(window.TALLY_TTL))]
        for field, delta in checked.items():
            args += [field, repr(delta)]
        try:
            await self._run(5, [f"{self.prefix}:t:{name}"], args)
        except Exception as exc:
            if "not be a finite number" in str(exc):
                raise TallyOverflow(f"tally {name!r}: a sum would not be a finite number") from None
            raise

    async def tallies(self, name: str) -> dict[str, float]:
        try:
            found = await self._call("hgetall", f"{self.prefix}:t:{name}")
        except Exception as exc:
            if "WRONGTYPE" in str(exc):
                return {}  # not a tally: the next `tally` replaces it
            raise
        if not isinstance(found, dict):
            return {}
        out = {}
        for field, raw in found.items():
            if isinstance(field, bytes):
                field = field.decode("utf-8", "replace")
            out[str(field)] = _spend(raw, 512)
        return out

    async def clear(self, match: tuple[str, str] | None) -> None:
        tail = "*" if match is None else f"{_glob(match[0])}|*|{_glob(match[1])}"
        pattern = f"{_glob(self.prefix)}:k:{tail}"
        loop = _asyncio_loop()
        if loop is not None:
            client = self._async_client(loop)[0]
            batch = [k async for k in client.scan_iter(match=pattern, count=1000)]
            for i in range(0, len(batch), 500):
                await client.delete(*batch[i : i + 500])
            return
        sync = self._sync_client()[0]

        def run() -> None:
            batch = list(sync.scan_iter(match=pattern, count=1000))
            for i in range(0, len(batch), 500):
                sync.delete(*batch[i : i + 500])

        await anyio.to_thread.run_sync(run)

    async def clear_budgets(self, name: str | None) -> None:
        if name is not None:
            await self._call("delete", *self._budget_keys(name))
            return
        for kind in "brs":
            found = await self._scan(f"{_glob(self.prefix)}:{kind}:*")
            for i in range(0, len(found), 500):
                await self._call("delete", *found[i : i + 500])

    async def contents(self) -> dict[str, Any]:
        return await read_contents(self)

    async def aclose(self) -> None:
        # This loop's client; another loop's is closed as that loop ends (closing it here
        # would schedule work on a loop that is not running, or has closed).
        loop = _asyncio_loop()
        found = None if loop is None else self._clients.pop(loop, None)
        for ended in [x for x in self._clients if x.is_closed()]:
            del self._clients[ended]
        if found is not None:
            await found[0].aclose()
        if self._sync is not None:
            self._sync[0].close()
            self._sync = None
