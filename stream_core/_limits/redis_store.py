"""The limiter's state in Redis, for a fleet: one round trip to admit a call and one to
settle it, each a Lua script (atomic on the server, so a thousand workers never race).

The scripts are a port of `window` (same state, same JSON, same rules), run on the state
kept as one JSON string per key (`cjson`, which every Redis ships). redis-py's asyncio
client is used under asyncio; under trio, which it does not support, its blocking client
runs in a worker thread. Needs the `redis` extra (`pip install 'stream-core[redis]'`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

import anyio

from .._transport import _spawn_detached
from . import redact
from .stores import LimitSettlement, LimitStore
from .window import LATE, PERIOD, POLL, SLACK, Snapshot

__all__ = ["RedisStore"]

_EXPIRE = 86_400
"""Seconds a key's state outlives its last change (budgets never expire)."""

_COMMON = """
local function val(x) if x == cjson.null then return nil end return x end
local function roll(s, now)
  local r, period = s[3], s[5]
  if period <= 0 then period = __PERIOD__ end
  s[2] = s[1]
  s[4] = s[4] + 1
  s[3] = r + period * (math.floor((now - r) / period) + 1)
end
local function admit(entry, needs, now, route)
  local paused = entry.p or 0
  if route and (entry.c or 0) > paused then paused = entry.c end
  if paused > now then return paused - now, {} end
  local names = entry.n
  if not names then return 0, {} end
  local wait = 0
  for name, s in pairs(names) do
    if s[3] ~= 0 and now >= s[3] + __LATE__ then roll(s, now) end
    local need = needs[name] or 0
    if need > s[2] and not (need > s[1] and s[2] >= s[1]) then
      local w = __POLL__
      if s[3] ~= 0 then w = s[3] + __LATE__ - now end
      if name ~= "requests" and w > __POLL__ then w = __POLL__ end
      if w > wait then wait = w end
    end
  end
  if wait > 0 then return wait, {} end
  local snap = {}
  for name, s in pairs(names) do
    local need = needs[name] or 0
    s[2] = s[2] - need
    snap[name] = s[4]
  end
  return 0, snap
end
local function settle(entry, snap, used, needs, report, pause_until, now)
  if not entry.n then entry.n = {} end
  local names = entry.n
  for name, gen in pairs(snap) do
    local s = names[name]
    if s then
      if s[3] ~= 0 and now >= s[3] + __LATE__ then roll(s, now) end
      if s[4] == gen then
        s[2] = math.min(s[1], s[2] + (needs[name] or 0) - (used[name] or 0))
      end
    end
  end
  for _, r in ipairs(report) do
    local name, limit, remaining, resets_at = r[1], val(r[2]), val(r[3]), val(r[4])
    if limit then
      local s = names[name]
      if not s then
        local wait = 0
        if resets_at then wait = math.max(resets_at - now, 0) end
        names[name] = {limit, remaining or limit, resets_at or now + __PERIOD__, 1, wait}
      else
        s[1] = limit
        if resets_at then s[5] = math.max(s[5], resets_at - now) end
        local ended = s[3]
        local stale = false
        if ended ~= 0 and now >= ended + __LATE__ then
          roll(s, now)
          if resets_at and resets_at <= ended + __SLACK__ then stale = true end
        end
        if not stale then
          if remaining then s[2] = math.min(s[2], remaining) end
          if resets_at then s[3] = resets_at end
        end
      end
    end
  end
  if pause_until > (entry.p or 0) then entry.p = pause_until end
end
local function load(key)
  local raw = redis.call('GET', key)
  if raw then return cjson.decode(raw) end
  return nil
end
local function save(key, entry)
  redis.call('SET', key, cjson.encode(entry), 'EX', __EXPIRE__)
end
""".replace("__POLL__", repr(POLL)).replace("__SLACK__", repr(SLACK))
_COMMON = _COMMON.replace("__LATE__", repr(LATE)).replace("__PERIOD__", repr(PERIOD))
_COMMON = _COMMON.replace("__EXPIRE__", str(_EXPIRE))

_ADMIT = (
    _COMMON
    + """
local now = tonumber(ARGV[1])
local needs = cjson.decode(ARGV[2])
local asks = cjson.decode(ARGV[3])
local entry = load(KEYS[1])
local wait, snap = 0, {}
if entry then wait, snap = admit(entry, needs, now, ARGV[4] == "1") end
if wait > 0 then return cjson.encode({wait, {}, false}) end
for j, ask in ipairs(asks) do
  local left = ask[2] - tonumber(redis.call('GET', KEYS[1 + j]) or '0')
  if ask[3] > left then
    if entry then
      settle(entry, snap, {}, needs, {}, 0, now)
      save(KEYS[1], entry)
    end
    return cjson.encode({0, {}, {ask[1], left}})
  end
end
for j, ask in ipairs(asks) do redis.call('INCRBYFLOAT', KEYS[1 + j], tostring(ask[3])) end
if entry then save(KEYS[1], entry) end
return cjson.encode({0, snap, false})
"""
)

_SETTLE = (
    _COMMON
    + """
local now = tonumber(ARGV[1])
local snap, used, needs = cjson.decode(ARGV[2]), cjson.decode(ARGV[3]), cjson.decode(ARGV[4])
local report, pause_until = cjson.decode(ARGV[5]), tonumber(ARGV[6])
local settles = cjson.decode(ARGV[7])
if next(snap) or #report > 0 or pause_until > 0 then
  local entry = load(KEYS[1]) or {}
  settle(entry, snap, used, needs, report, pause_until, now)
  save(KEYS[1], entry)
end
for j, s in ipairs(settles) do
  redis.call('INCRBYFLOAT', KEYS[1 + j], tostring(s[2] - s[1]))
end
return 1
"""
)

_COOL = (
    _COMMON
    + """
local entry = load(KEYS[1]) or {}
local until_ = tonumber(ARGV[1])
if until_ > (entry.c or 0) then entry.c = until_ end
save(KEYS[1], entry)
return 1
"""
)


async def _close_at_loop_end(client: Any) -> None:
    """A loop's client is closed as its loop ends (asyncio cancels this task then)."""
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()


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
                client.register_script(_ADMIT),
                client.register_script(_SETTLE),
                client.register_script(_COOL),
            )
            self._clients[loop] = found
            _spawn_detached(lambda: _close_at_loop_end(client))
        return found

    def _sync_client(self) -> Any:
        with self._lock:
            if self._sync is None:
                import redis

                client = redis.Redis.from_url(self.url, **self._options())
                self._sync = (
                    client,
                    client.register_script(_ADMIT),
                    client.register_script(_SETTLE),
                    client.register_script(_COOL),
                )
            return self._sync

    async def _run(self, which: int, keys: list[str], args: list[Any]) -> Any:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            script = self._async_client(loop)[which]
            return await script(keys=keys, args=args)
        script = self._sync_client()[which]
        return await anyio.to_thread.run_sync(lambda: script(keys=keys, args=args))

    async def _get(self, keys: list[str]) -> list[Any]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            found: list[Any] = await self._async_client(loop)[0].mget(keys)
            return found
        client = self._sync_client()[0]
        result: list[Any] = await anyio.to_thread.run_sync(lambda: client.mget(keys))
        return result

    def _key(self, key: str) -> str:
        return f"{self.prefix}:k:{key}"

    def _budget(self, name: str) -> str:
        return f"{self.prefix}:b:{name}"

    # --- the store ----------------------------------------------------------------------

    async def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        keys = [self._key(key), *(self._budget(a[0]) for a in asks)]
        args = [repr(now), json.dumps(needs), json.dumps(asks), "1" if route else "0"]
        wait, snap, short = json.loads(await self._run(1, keys, args))
        return float(wait), snap or {}, short or None

    async def settle(self, settlement: LimitSettlement, now: float) -> None:
        s = settlement
        if not (s.snap or s.report or s.pause_until or s.settles):
            return
        keys = [self._key(s.key), *(self._budget(b[0]) for b in s.settles)]
        args = [
            repr(now),
            json.dumps(s.snap) if s.snap else "{}",
            json.dumps(s.used) if s.used else "{}",
            json.dumps(s.needs) if s.needs else "{}",
            json.dumps(s.report),
            repr(s.pause_until),
            json.dumps([b[1:] for b in s.settles]),
        ]
        await self._run(2, keys, args)

    async def cool(self, key: str, until: float) -> None:
        await self._run(3, [self._key(key)], [repr(until)])

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
        (raw,) = await self._get([self._budget(name)])
        return float(raw) if raw else 0.0

    async def aclose(self) -> None:
        for client, *_ in list(self._clients.values()):
            await client.aclose()
        self._clients.clear()
        if self._sync is not None:
            self._sync[0].close()
            self._sync = None
