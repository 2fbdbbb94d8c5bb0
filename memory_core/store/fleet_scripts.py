"""Lua scripts the fleet shares: locks, the rate limit, the queue of scopes to maintain, and
the holds that keep budgets under bursts. Each touches only keys passed in KEYS, one hash tag
per script, so it runs unchanged on Redis Cluster. :mod:`memory_core.store.scripts` loads
and runs them with the rest.
"""

from __future__ import annotations

# KEYS: lock. ARGV: token. Deletes the lock only if we still hold it.
RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: lock. ARGV: token, ttl (ms). Keeps a lock we still hold alive.
RENEW_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# KEYS: lock. ARGV: the value its holder wrote (as read), our value, ttl (ms).
# Takes over the lock of a holder found dead, only if that holder still has it: a worker that
# took it meanwhile (or the dead one's lock expiring and being taken anew) wins.
TAKE_OVER_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""

# KEYS: the rate log. ARGV: now (ms), window (ms), limit, a unique member.
# A sliding-window log shared by the fleet: admits a request if fewer than `limit` were
# admitted in the last window, else says how many ms to wait.
RATE_ACQUIRE = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window * 2)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""

# KEYS: queue, in-flight. ARGV: now (ms), lease (ms).
# Claims the oldest queued scope for one worker: out of the queue, into the in-flight set
# with a lease; if the worker dies, the lease runs out and the scope is queued again.
FLEET_CLAIM = """
local now = tonumber(ARGV[1])
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, scope in ipairs(expired) do
  redis.call('ZREM', KEYS[2], scope)
  redis.call('ZADD', KEYS[1], 'NX', 0, scope)
end
local item = redis.call('ZPOPMIN', KEYS[1])
if #item == 0 then return false end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), item[1])
return item[1]
"""

# Budgets that hold under bursts: before a reply's model call its tokens are estimated and
# held against the limits in the same atomic step that checks them, so concurrent replies
# see each other; after the call the real usage is counted and the hold dropped. A hold
# is a member "<id>|<member>|<tokens>|<thread>" of a sorted set scored by when it lapses
# (a process that dies holding one does not block the budget for long).
_HELD = """
local function held(key, now, member, thread)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local all, mine, in_thread, mine_in_thread = 0, 0, 0, 0
  for _, h in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    local _, who, tokens, where = string.match(h, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
    tokens = tonumber(tokens) or 0
    all = all + tokens
    local me = member ~= '' and who == member
    if me then mine = mine + tokens end
    if thread ~= '' and where == thread then
      in_thread = in_thread + tokens
      if me then mine_in_thread = mine_in_thread + tokens end
    end
  end
  return all, mine, in_thread, mine_in_thread
end
local function spent(key, field) return tonumber(redis.call('HGET', key, field) or '0') or 0 end
"""

# KEYS: the channel's spend day, the thread's own (the channel's for a channel), the
# channel's holds. ARGV: now (ms), lapse (ms), hold id, tokens, member id ('' = none),
# thread scope ('' = none), limits: the channel's, a member's in it, the thread's own, a
# member's in the thread (0 = none). Returns '' (held) or the limit reached: 'thread' |
# 'scope' | 'thread_member' | 'member'.
HOLD_SCOPE = (
    _HELD
    + """
local now, member, thread = tonumber(ARGV[1]), ARGV[5], ARGV[6]
local all, mine, in_thread, mine_in_thread = held(KEYS[3], now, member, thread)
local scope_limit, member_limit = tonumber(ARGV[7]), tonumber(ARGV[8])
local thread_limit, thread_member_limit = tonumber(ARGV[9]), tonumber(ARGV[10])
if thread_limit > 0 and spent(KEYS[2], 'tokens') + in_thread >= thread_limit then
  return 'thread'
end
if scope_limit > 0 and spent(KEYS[1], 'tokens') + all >= scope_limit then return 'scope' end
if member ~= '' then
  local field = 'u:' .. member
  if thread_member_limit > 0 and spent(KEYS[2], field) + mine_in_thread >= thread_member_limit then
    return 'thread_member'
  end
  if member_limit > 0 and spent(KEYS[1], field) + mine >= member_limit then return 'member' end
end
local hold = ARGV[3] .. '|' .. member .. '|' .. ARGV[4] .. '|' .. thread
redis.call('ZADD', KEYS[3], tonumber(ARGV[2]), hold)
redis.call('PEXPIREAT', KEYS[3], tonumber(ARGV[2]))
return ''
"""
)

# KEYS: the server's spend day, the server's holds. ARGV: now (ms), lapse (ms), hold id,
# tokens, the server's limit. Returns '' (held) or 'server'.
HOLD_SERVER = (
    _HELD
    + """
local all = held(KEYS[2], tonumber(ARGV[1]), '', '')
if spent(KEYS[1], 'tokens') + all >= tonumber(ARGV[5]) then return 'server' end
redis.call('ZADD', KEYS[2], tonumber(ARGV[2]), ARGV[3] .. '||' .. ARGV[4] .. '|')
redis.call('PEXPIREAT', KEYS[2], tonumber(ARGV[2]))
return ''
"""
)


FLEET_SCRIPTS: dict[str, str] = {
    "release_lock": RELEASE_LOCK,
    "renew_lock": RENEW_LOCK,
    "take_over_lock": TAKE_OVER_LOCK,
    "rate_acquire": RATE_ACQUIRE,
    "fleet_claim": FLEET_CLAIM,
    "hold_scope": HOLD_SCOPE,
    "hold_server": HOLD_SERVER,
}
