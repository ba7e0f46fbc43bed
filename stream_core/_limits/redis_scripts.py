"""The Lua scripts `redis_store.RedisStore` runs on the server: a line-by-line port of
`window` (same state, same JSON, same rules) on the state kept as one JSON string per key
(`cjson`, which every Redis ships). Each script is atomic on the server, so a thousand
workers never race. Text only: the client side is `redis_store`.
"""

from __future__ import annotations

import re

from .window import LATE, PERIOD, POLL, SLACK

__all__ = ["ADMIT", "COOL", "EXPIRE", "SETTLE", "SPEND", "SPENT", "TALLY"]

SPEND = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")  # a plain decimal
_SPEND_LUA = "^%-?%d*%.?%d*[eE]?[-+]?%d*$"  # the same, in Lua
EXPIRE = 86_400
"""Seconds a key's state outlives its last change (budgets never expire)."""

_COMMON = """
local function val(x) if x == cjson.null then return nil end return x end
local function num(x)
  return type(x) == 'number' and x == x and x ~= math.huge and x ~= -math.huge
end
local function clock()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local maxp = tonumber(ARGV[2])
local function roll(s, now)
  local r, period = s[3], s[5]
  if period <= 0 then period = __PERIOD__ end
  s[2] = s[1]
  s[4] = s[4] + 1
  s[3] = r + period * (math.floor((now - r) / period) + 1)
end
local function check(entry, now)
  if type(entry) ~= 'table' then return nil end
  local far = now + maxp
  for _, f in ipairs({'p', 's', 'c'}) do
    local x = entry[f]
    if x ~= nil then
      if not num(x) then entry[f] = nil elseif x > far then entry[f] = far end
    end
  end
  local names = entry.n
  if names == nil then return entry end
  if type(names) ~= 'table' then entry.n = nil return entry end
  for name, s in pairs(names) do
    local ok = type(s) == 'table' and #s == 5
    if ok then for i = 1, 5 do if not num(s[i]) then ok = false end end end
    if ok and (s[1] < 0 or s[3] < 0) then ok = false end
    if not ok then names[name] = nil else
      if s[2] > s[1] then s[2] = s[1] end
      if s[3] > far + __LATE__ then s[3] = far end
      if s[5] < 0 then s[5] = 0 end
      if s[5] > maxp then s[5] = maxp end
    end
  end
  return entry
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
local function forgive(entry, answered_at)
  if (entry.p or 0) ~= 0 and answered_at > (entry.s or 0) then
    entry.p = nil
    entry.s = nil
  end
end
local function settle(entry, snap, used, needs, report, pause_until, now, answered_at)
  local far = now + maxp
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
      if resets_at then resets_at = math.min(now + resets_at, far) end
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
  if pause_until then
    pause_until = math.min(pause_until, far)
    if pause_until > (entry.p or 0) then entry.p = pause_until end
    entry.s = now
  elseif answered_at then
    forgive(entry, answered_at)
  end
end
local function load(key)
  local raw = redis.pcall('GET', key)
  if type(raw) ~= 'string' then return nil end
  local ok, entry = pcall(cjson.decode, raw)
  if ok then return entry end
  return nil
end
local function save(key, entry)
  redis.call('SET', key, cjson.encode(entry), 'EX', __EXPIRE__)
end
local function spent(key)
  local raw = redis.pcall('GET', key)  -- a plain decimal only: INCRBYFLOAT refuses '0x1'
  local x = type(raw) == 'string' and #raw < 64 and string.find(raw, __SPEND__) and tonumber(raw)
  if not x or not num(x) or x < 0 then
    redis.call('SET', key, '0')
    return 0
  end
  return x
end
local function expire(bkey, rkey, now, cap)  -- a reservation is at most the cap
  local old = redis.pcall('ZRANGEBYSCORE', rkey, '-inf', now, 'LIMIT', 0, 1000)
  if type(old) ~= 'table' or old.err then redis.call('DEL', rkey) return end  -- not a zset
  if #old == 0 then return end
  local back = 0
  for _, m in ipairs(old) do
    local x = tonumber(string.match(m, '|([^|]*)$'))
    if x and num(x) and x > 0 and x <= cap then back = back + x end
    redis.call('ZREM', rkey, m)
  end
  redis.call('SET', bkey, tostring(math.max(spent(bkey) - back, 0)))
end
local function member(zkey, m)  -- whether `m` is in the sorted set (false if not one)
  return type(redis.pcall('ZSCORE', zkey, m)) == 'string'
end
local function forget(skey, now)  -- settled ids past their time
  local done = redis.pcall('ZREMRANGEBYSCORE', skey, '-inf', now)
  if type(done) == 'table' and done.err then redis.call('DEL', skey) end
end
"""
_MARKS = {"POLL": POLL, "SLACK": SLACK, "LATE": LATE, "PERIOD": PERIOD, "EXPIRE": EXPIRE}
for _mark, _value in {**_MARKS, "SPEND": _SPEND_LUA}.items():
    _COMMON = _COMMON.replace(f"__{_mark}__", repr(_value))

# KEYS: the key's state, then per budget its spend, its reservations (a sorted set of
# "id|amount" by expiry) and the ids settled that are remembered (by when they are
# forgotten). ARGV: the caller's `now` ('' for the server's TIME), max_pause, the needs,
# the budget asks ([name, cap, worst case, id, seconds held] each), "1" for a route.
ADMIT = (
    _COMMON
    + """
local now = clock()
local needs = cjson.decode(ARGV[3])
local asks = cjson.decode(ARGV[4])
local entry = check(load(KEYS[1]), now)
local wait, snap = 0, {}
if entry then wait, snap = admit(entry, needs, now, ARGV[5] == "1") end
if wait > 0 then
  save(KEYS[1], entry)
  return cjson.encode({wait, {}, false})
end
local fresh = {}
for j, ask in ipairs(asks) do
  local bkey, rkey, skey = KEYS[3 * j - 1], KEYS[3 * j], KEYS[3 * j + 1]
  expire(bkey, rkey, now, ask[2])
  forget(skey, now)
  -- A reservation already held, or settled, is not made again.
  if not (ask[4] and (member(rkey, ask[4]) or member(skey, ask[4]))) then
    local left = ask[2] - spent(bkey)
    if ask[3] > left then
      if entry then
        settle(entry, snap, {}, needs, {}, nil, now, nil)
        save(KEYS[1], entry)
      end
      return cjson.encode({0, {}, {ask[1], left}})
    end
    fresh[#fresh + 1] = j
  end
end
for _, j in ipairs(fresh) do
  local ask = asks[j]
  redis.call('INCRBYFLOAT', KEYS[3 * j - 1], tostring(ask[3]))
  if ask[4] then redis.call('ZADD', KEYS[3 * j], now + ask[5], ask[4]) end
end
if entry then save(KEYS[1], entry) end
return cjson.encode({0, snap, false})
"""
)

# KEYS as `ADMIT`'s. ARGV: now, max_pause, snap, used, needs, the report (resets as
# seconds from now), the pause (seconds from now, '' for none), the budget settlements
# ([reserved, actual, id, seconds the id is remembered] each, the last two optional), and
# how long ago a normal answer arrived ('' for none).
SETTLE = (
    _COMMON
    + """
local now = clock()
local snap, used, needs = cjson.decode(ARGV[3]), cjson.decode(ARGV[4]), cjson.decode(ARGV[5])
local report = cjson.decode(ARGV[6])
local pause_until, answered_at = nil, nil
if ARGV[7] ~= '' then pause_until = now + tonumber(ARGV[7]) end
if ARGV[9] ~= '' then answered_at = now - tonumber(ARGV[9]) end
local settles = cjson.decode(ARGV[8])
if next(snap) or #report > 0 or pause_until then
  local entry = check(load(KEYS[1]), now) or {}
  settle(entry, snap, used, needs, report, pause_until, now, answered_at)
  save(KEYS[1], entry)
elseif answered_at then
  local entry = check(load(KEYS[1]), now)
  if entry and (entry.p or 0) ~= 0 then
    forgive(entry, answered_at)
    save(KEYS[1], entry)
  end
end
for j, s in ipairs(settles) do
  local bkey, rkey, skey = KEYS[3 * j - 1], KEYS[3 * j], KEYS[3 * j + 1]
  local keep = s[4]  -- seconds the id is remembered as settled (`hold_budget`'s)
  if keep then forget(skey, now) end
  if not (keep and member(skey, s[3])) then  -- settled before: nothing twice
    local delta = s[2] - s[1]
    if s[3] and redis.pcall('ZREM', rkey, s[3]) ~= 1 then delta = s[2] end
    redis.call('SET', bkey, tostring(math.max(spent(bkey) + delta, 0)))
    if keep then
      redis.call('ZADD', skey, now + keep, s[3])
      redis.call('EXPIRE', skey, math.ceil(keep) + 60)
    end
  end
end
return 1
"""
)

# A route's failure, or with reset its success (`stores.cool_entry`: `r` failures in a
# row, `b` when the last was counted, `a` the one before). ARGV: now ('' for TIME), how
# long ago the attempt was sent as the caller measured it ('' unknown), the wait from
# now ('' for none), that plus the round trip ('' unknown), the backoff's base
# and cap ('' for none), "1" to reset. Answers [seconds the key cools from now, failures].
COOL = (
    _COMMON
    + """
local finite = num
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local entry = load(KEYS[1])
local reset = ARGV[7] == '1'
if type(entry) ~= 'table' then
  if reset then return cjson.encode({0, 0}) end
  entry = {}
end
local row, began, prior = entry.r, entry.b, entry.a
if not finite(row) or row < 0 then row = 0 end
if not finite(began) or began > now + 60 then began = 0 end
if not finite(prior) or prior > began then prior = 0 end
if entry.c ~= nil and not finite(entry.c) then entry.c = nil end
row = math.min(math.floor(row), 64)
local same = ARGV[4] ~= '' and now - tonumber(ARGV[4]) < began
if reset then
  if row == 0 then return cjson.encode({(entry.c or now) - now, row}) end
  if same then
    -- It answered after the failure before the last: the last stands alone.
    if row < 2 or ARGV[2] == '' or prior <= 0 or now - tonumber(ARGV[2]) < prior then
      return cjson.encode({(entry.c or now) - now, row})
    end
    row = 1
  else
    row = 0
  end
  entry.r = row
else
  if not same then
    row = row + 1
    entry.a = began
    began = now
    entry.r = row
    entry.b = now
  end
  local until_ = 0
  if ARGV[3] ~= '' then until_ = now + tonumber(ARGV[3]) end
  if ARGV[5] ~= '' then
    local w = tonumber(ARGV[5]) * 2 ^ math.min(math.max(row, 1) - 1, 30)
    w = math.min(tonumber(ARGV[6]), w)
    if began + w > until_ then until_ = began + w end
  end
  if until_ > (entry.c or 0) then entry.c = until_ end
end
save(KEYS[1], entry)
return cjson.encode({(entry.c or now) - now, row})
"""
)

# KEYS: a budget's spend and its reservations. ARGV: now ('' for TIME), max_pause. The
# reservations past their time are given back; answers the spend as kept (a string).
SPENT = (
    _COMMON
    + """
local now = clock()
if redis.call('EXISTS', KEYS[2]) == 1 then expire(KEYS[1], KEYS[2], now, math.huge) end
return redis.pcall('GET', KEYS[1])
"""
)

# KEYS: a tally (a hash). ARGV: seconds it is kept, then field and delta pairs. All the
# sums are checked before any is written: none is added unless every one is finite. A
# field that is not a plain decimal number (not the store's) starts again from 0.
TALLY = """
local function num(x)
  return type(x) == 'number' and x == x and x ~= math.huge and x ~= -math.huge
end
local key = KEYS[1]
local kind = redis.call('TYPE', key)
if type(kind) == 'table' then kind = kind.ok end
if kind ~= 'none' and kind ~= 'hash' then redis.call('DEL', key) end
local plain = {}
for i = 2, #ARGV, 2 do
  local raw = redis.call('HGET', key, ARGV[i])
  local x = 0
  plain[i] = true
  if type(raw) == 'string' then
    x = #raw < 512 and string.find(raw, __SPEND__) and tonumber(raw)
    if not x or not num(x) then x, plain[i] = 0, false end
  end
  if not num(x + tonumber(ARGV[i + 1])) then
    return redis.error_reply('a tally would not be a finite number')
  end
end
for i = 2, #ARGV, 2 do
  if not plain[i] then redis.call('HDEL', key, ARGV[i]) end
  redis.call('HINCRBYFLOAT', key, ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', key, ARGV[1])
return 1
""".replace("__SPEND__", repr(_SPEND_LUA))
