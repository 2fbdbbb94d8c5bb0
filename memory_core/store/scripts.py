"""Lua scripts: the writes that must not race, each one atomic on one scope's keys.

Every script touches only keys passed in KEYS, all of one scope (one hash tag), so it runs
unchanged on Redis Cluster. Compare-and-set guards make them safe to run twice, from two
processes, or again after a crash half-way through the Python work around them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError

from memory_core.store.fleet_scripts import FLEET_SCRIPTS
from memory_core.store.learning_scripts import LEARNING_SCRIPTS
from memory_core.store.lua_common import CONSUME, nothing_forgotten_since

if TYPE_CHECKING:
    from memory_core.store.lane import FastLane

# KEYS: log, state, ids, root state, threads, speakers, ledger (the last four are the
# subtree's: a thread's channel's; a channel's own). ARGV: ts_ms, role, author, author_id, text,
# platform_id, tokens, day, thread ('' for a channel; else the thread's scope, recorded in
# the channel's threads), place name, held ("1": a message held while Redis was away and
# stored late; if it did get stored before the connection broke, return that entry instead
# of storing it twice), own-day end (ms; '' = off; see below), ids max, public ("1": the
# place is visible to the whole guild or workspace), speaker ("<user id>|<thread>" recorded
# in the subtree's speakers; '' = none), reply-to (the user id the bot's answer answers;
# '' = none), audience (the place's, kept in its state; '' = unknown), answers (the platform
# id of the message the bot's answer answers; '' = none), the author's ledger field
# ('u:<digest>'; '' = none), the message's ledger field ('m:<digest>'; '' = none), the
# ledger version its text was checked at ('' = not checked), the platform ids of the
# answer's other posted parts (space-separated; '' = none).
# The erasure ledger (memory_core.store.gone) is checked before anything is written: a
# message forgotten by its id, said by a person before they were forgotten, or said before
# its place was forgotten is not stored ('forgotten'); one said before the newest forgotten
# text is stored only if the caller checked its text against the ledger as it is now
# ('recheck', with the ledger's version, otherwise).
# Stores one message with a monotonic stream id (its ms never goes backwards, so day maths on
# ids is safe even when platforms deliver out of order) and returns what the caller needs to
# decide on maintenance, all in the same round trip. A thread's settings it has not set
# itself are its channel's (mode, timezone, language, pause), read here in the same step.
# The 10th value says what happened: '' stored, 'older' stored but older than the newest
# message (its 'ts' field keeps its own time; its stream id is the newest one's),
# 'duplicate' (nothing written), 'day_closed'.
INGEST = """
local st, root, A = KEYS[2], KEYS[4], ARGV
-- On one Redis, the writes that note where it was said, in this same step (KEYS[8..10]: the
-- scopes index, the server's places and thread parents); on a cluster they are other
-- shards' keys, sent beside this script instead. (pcall: as beside it, one that fails
-- never fails the message; the scope's next message writes it again.)
if KEYS[8] then redis.pcall('ZADD', KEYS[8], A[1], A[23]) end
if KEYS[9] then redis.pcall('ZADD', KEYS[9], A[1], A[24]) end
if KEYS[10] then redis.pcall('HSET', KEYS[10], A[25], A[24]) end
-- The state read once (a thread's channel's too), and written once below: each redis.call
-- costs (a few µs), and this runs for every message.
local s = redis.call('HMGET', st, 'paused', 'day', 'retry_at', 'unsum_tokens', 'unsum_count',
  'last_ms', 'tz', 'mode', 'lang', 'created_ms', 'msg_count')
local paused, tz, mode, lang = s[1], s[7] or '', s[8] or '', s[9] or ''
if root ~= st then
  -- A thread's settings it has not set itself are its channel's.
  local r = redis.call('HMGET', root, 'paused', 'tz', 'mode', 'lang')
  paused = paused or r[1]
  if tz == '' and r[2] then tz = r[2] end
  if mode == '' and r[3] then mode = r[3] end
  if lang == '' and r[4] then lang = r[4] end
end
local day_now, retry_at = s[2] or '', tonumber(s[3] or '0')
if paused == '1' then
  -- Not stored, but the scope's settings still hold: a channel set to "off" stays silent.
  return {'', 0, 0, day_now, tz, mode, lang, retry_at, 1}
end
local unsum_tokens, unsum_count = tonumber(s[4] or '0'), tonumber(s[5] or '0')
-- Store once per platform id (a platform's message id, a replayed line's identity): the
-- ids stored lately are kept in KEYS[3], scored by stream time, the newest ARGV[13] of them.
if A[6] ~= '' and redis.call('ZSCORE', KEYS[3], A[6]) then
  return {'', unsum_tokens, unsum_count, day_now, tz, mode, lang, retry_at, 0, 'duplicate'}
end
-- The ledger: what was forgotten never comes back, whoever writes it.
local g = redis.call('HMGET', KEYS[7], 'all', A[9] == '' and 'all' or 'all:' .. A[9], A[20],
  A[19], 'tmax', 'v')
local said = tonumber(A[1])
local function before(at) return at and said < tonumber(at) end
if before(g[1]) or before(g[2]) or g[3] or before(g[4]) then
  return {'', unsum_tokens, unsum_count, day_now, tz, mode, lang, retry_at, 0, 'forgotten'}
end
if before(g[5]) and A[21] ~= (g[6] or '0') then
  return {'', unsum_tokens, unsum_count, day_now, tz, mode, lang, retry_at, 0, 'recheck',
    g[6] or '0'}
end
local last = tonumber(s[6] or '0')
-- Own day (a replayed line): the line is refused if it would be counted in a later day
-- than its own, i.e. its day is closed already, or its stream id (the newest message's, to
-- stay monotonic) would fall after the end of its day (ARGV[12]).
if A[12] ~= '' and ((s[2] and A[8] < s[2]) or last >= tonumber(A[12])) then
  return {'', unsum_tokens, unsum_count, day_now, tz, mode, lang, retry_at, 0, 'day_closed'}
end
if A[11] == '1' then  -- held
  for _, e in ipairs(redis.call('XRANGE', KEYS[1], A[1], '+', 'COUNT', 50)) do
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    if f['ts'] == A[1] and f['u'] == A[4] and f['t'] == A[5] then
      return {e[1], unsum_tokens, unsum_count, day_now, tz, mode, lang, retry_at, 0, ''}
    end
  end
end
local ms = tonumber(A[1])
if ms < last then ms = last end
-- %d: Lua would write a time past year 5138 (15+ digits) as 2.5e+14, not a stream id.
local stamp = string.format('%d', ms)
local fields = {'r', A[2], 'a', A[3], 'u', A[4], 't', A[5], 'ts', A[1], 'p', A[6], 'k', A[7]}
local n = 14
-- 'v': said in a place the whole guild or workspace can see (absent: private).
if A[14] == '1' then fields[n + 1] = 'v'; fields[n + 2] = '1'; n = n + 2 end
-- 'o': the bot's answer to this person (forget me takes it with their own messages).
if A[16] ~= '' then fields[n + 1] = 'o'; fields[n + 2] = A[16]; n = n + 2 end
-- 'q': the message it answers (a thread started from it shows the answer too).
if A[18] ~= '' then fields[n + 1] = 'q'; fields[n + 2] = A[18]; n = n + 2 end
-- 'x': the answer's other posted parts (a delete of any, or a learn, knows them).
if A[22] ~= '' then fields[n + 1] = 'x'; fields[n + 2] = A[22]; n = n + 2 end
local id = redis.call('XADD', KEYS[1], stamp .. '-*', unpack(fields, 1, n))
for part in string.gmatch(A[22], '%S+') do redis.call('ZADD', KEYS[3], ms, part) end
if A[6] ~= '' then
  redis.call('ZADD', KEYS[3], ms, A[6])
  if redis.call('ZCARD', KEYS[3]) > tonumber(A[13]) then
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(A[13]) - 1)
  end
end
if A[9] ~= '' then redis.call('ZADD', KEYS[5], ms, A[9]) end
if A[15] ~= '' then redis.call('ZADD', KEYS[6], 0, A[15]) end
-- One write of the state: the counters from what was read above (this script is atomic).
unsum_tokens, unsum_count = unsum_tokens + tonumber(A[7]), unsum_count + 1
local day = s[2] or A[8]
local set = {'last_ms', stamp, 'unsum_tokens', string.format('%d', unsum_tokens),
  'unsum_count', string.format('%d', unsum_count), 'day', day,
  'msg_count', string.format('%d', (tonumber(s[11]) or 0) + 1)}
n = 10
if not s[10] then set[n + 1] = 'created_ms'; set[n + 2] = A[1]; n = n + 2 end
if A[10] ~= '' then set[n + 1] = 'name'; set[n + 2] = A[10]; n = n + 2 end
if A[17] ~= '' then set[n + 1] = 'aud'; set[n + 2] = A[17]; n = n + 2 end
redis.call('HSET', st, unpack(set, 1, n))
return {id, unsum_tokens, unsum_count, day, tz, mode, lang, retry_at, 0,
  tonumber(A[1]) < last and 'older' or ''}
"""

# Shared by the scripts that apply retention: drop raw messages with ids below a MINID and
# their embeddings with them, in the same atomic step (a vector says what its message said).
_TRIM = """
local function trim_log(log, vectors, ids, minid)
  -- A MINID of milliseconds alone means ms-0; XRANGE's exclusive end needs the full id.
  if not string.find(minid, '-', 1, true) then minid = minid .. '-0' end
  if minid ~= '0-0' and redis.call('EXISTS', vectors) == 1 then
    local start = '-'
    local trimmed = false
    while true do
      local batch = redis.call('XRANGE', log, start, '(' .. minid, 'COUNT', 1000)
      if #batch == 0 then break end
      trimmed = true
      local ids = {}
      for i, e in ipairs(batch) do ids[i] = e[1] end
      redis.call('HDEL', vectors, unpack(ids))
      if #batch < 1000 then break end
      start = '(' .. ids[#ids]
    end
    -- The first message kept was embedded with the one before it as context: its vector
    -- goes too (it is made again from what is left).
    if trimmed then
      local kept = redis.call('XRANGE', log, minid, '+', 'COUNT', 1)
      if #kept > 0 then redis.call('HDEL', vectors, kept[1][1]) end
    end
  end
  -- The platform ids of trimmed messages go too: a redelivery that old does not come, and
  -- a replayed line that old is refused by its closed day anyway.
  redis.call('ZREMRANGEBYSCORE', ids, '-inf', '(' .. string.match(minid, '^%d+'))
  return redis.call('XTRIM', log, 'MINID', minid)
end
"""

# KEYS: log, vectors, ids. ARGV: minid. Retention for a scope that closes no more days.
TRIM_LOG = (
    _TRIM
    + """
return trim_log(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
"""
)

# KEYS: log, vectors. ARGV: entry id, context id ('' for none), vector, ... (triples).
# Stores each vector only while its message, and the message before it that it was embedded
# with as context, are still in the log: a forget or a retention trim may have deleted
# either while the vector was being computed. Returns 1/0 per vector.
STORE_VECTORS = """
local kept = {}
local function present(id)
  return id == '' or #redis.call('XRANGE', KEYS[1], id, id, 'COUNT', 1) > 0
end
for i = 1, #ARGV, 3 do
  if ARGV[i] ~= '' and present(ARGV[i]) and present(ARGV[i + 1]) then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
    kept[#kept + 1] = 1
  else
    kept[#kept + 1] = 0
  end
end
return kept
"""

# A step back through a log, for a recall index too big for its cache (it keeps only the
# newest messages): up to ARGV[2] entries from ARGV[1] ("+" = the newest, "(id" = before it)
# backwards. Returns how many, and the last (oldest) one's id: the entries themselves stay
# on the server. KEYS: log.
RECALL_WINDOW = """
local rows = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', tonumber(ARGV[2]))
if #rows == 0 then return {0, ''} end
return {#rows, rows[#rows][1]}
"""

# A recall index's sync, in one call (atomic, as a transaction would be): the state's epoch and
# whether a forget is under way, the log's first entry, its entries after the index's last,
# the newest day record, the log's length (read at the same instant as the new entries: did
# anything leave?), and, for a search, vectors: those of ARGV[4..] (messages that had none at
# the last look) and, when there are at most ARGV[3] new entries, those of the new entries.
# KEYS: state, log, episodes, vectors. ARGV: after ('' = from the start), count, how many new
# entries' vectors at most (0: none), then message ids.
RECALL_SYNC = """
local state = redis.call('HMGET', KEYS[1], 'epoch', 'forgets_pending')
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local start = '-'
if ARGV[1] ~= '' then start = '(' .. ARGV[1] end
local fresh = redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', tonumber(ARGV[2]))
local newest = redis.call('LINDEX', KEYS[3], -1)
local length = redis.call('XLEN', KEYS[2])
local again = {}
if #ARGV > 3 then again = redis.call('HMGET', KEYS[4], unpack(ARGV, 4)) end
local fresh_vectors = {}
if #fresh > 0 and #fresh <= tonumber(ARGV[3]) then
  local ids = {}
  for i, entry in ipairs(fresh) do ids[i] = entry[1] end
  fresh_vectors = redis.call('HMGET', KEYS[4], unpack(ids))
end
return {state, first, fresh, newest, length, again, fresh_vectors}
"""

# KEYS: state, facts, root state (its fact counter). ARGV: expected short_upto, expected day,
# new short_upto, new short, tokens consumed, messages consumed, now (ISO), fact ops (JSON
# list), expected epoch.
# The epoch moves on every forget, so work computed from text that was forgotten meanwhile is
# thrown away instead of writing it back.
# Advances "summarised up to" only if nobody else did meanwhile. Returns {1, new state} or 0.
ADVANCE_SHORT = (
    CONSUME
    + """
local st = KEYS[1]
if (redis.call('HGET', st, 'short_upto') or '') ~= ARGV[1] then return 0 end
if (redis.call('HGET', st, 'day') or '') ~= ARGV[2] then return 0 end
if (redis.call('HGET', st, 'epoch') or '0') ~= ARGV[9] then return 0 end
redis.call('HSET', st, 'short_upto', ARGV[3], 'short', ARGV[4], 'short_at', ARGV[7],
  'failures', 0, 'retry_at', 0)
redis.call('HINCRBY', st, 'day_msgs', tonumber(ARGV[6]))
consume(st, ARGV[5], ARGV[6])
write_facts(KEYS[3], st, KEYS[2], ARGV[8])
return {1, redis.call('HGETALL', st)}
"""
)

# KEYS: state, days, done, log, episodes, vectors, ids. ARGV: day, next day, day JSON
# ('' = idle day, nothing to append), new short_upto ('' = unchanged), tokens consumed,
# messages consumed, days_max, week to consolidate ('' = none), now (ISO), expected
# short_upto, expected epoch, trim min id ('' = no retention trim: raw messages older than it
# go, all summarised by now, with their vectors and platform ids), episodes_max, the trim's
# time (ms) for the state.
# Appends one finished day exactly once: the marker and the day pointer both guard it.
# Returns {1, new state, days list}, {-1, state} (a week must be consolidated first) or 0.
CLOSE_DAY = (
    CONSUME
    + _TRIM
    + """
local st, days, done = KEYS[1], KEYS[2], KEYS[3]
local day = ARGV[1]
if redis.call('SISMEMBER', done, 'day:' .. day) == 1 then return 0 end
if (redis.call('HGET', st, 'day') or '') ~= day then return 0 end
if (redis.call('HGET', st, 'short_upto') or '') ~= ARGV[10] then return 0 end
if (redis.call('HGET', st, 'epoch') or '0') ~= ARGV[11] then return 0 end
if ARGV[8] ~= '' and (redis.call('HGET', st, 'week_pending') or '') ~= '' then
  return {-1, redis.call('HGETALL', st)}
end
if ARGV[3] ~= '' then
  redis.call('RPUSH', days, ARGV[3])
  redis.call('LTRIM', days, -tonumber(ARGV[7]), -1)
  redis.call('RPUSH', KEYS[5], ARGV[3])
  redis.call('LTRIM', KEYS[5], -tonumber(ARGV[13]), -1)
end
redis.call('SADD', done, 'day:' .. day)
redis.call('HSET', st, 'day', ARGV[2], 'short', '', 'last_rollover', ARGV[9],
  'failures', 0, 'retry_at', 0, 'day_msgs', 0)
if ARGV[4] ~= '' then redis.call('HSET', st, 'short_upto', ARGV[4]) end
if ARGV[3] ~= '' or ARGV[8] ~= '' then
  -- Only a new day summary or a week to consolidate is worth a tier refresh: idle days
  -- cost nothing.
  redis.call('HSET', st, 'refresh_pending', 1)
  redis.call('HINCRBY', st, 'refresh_seq', 1)
end
if ARGV[8] ~= '' then redis.call('HSET', st, 'week_pending', ARGV[8]) end
consume(st, ARGV[5], ARGV[6])
if ARGV[12] ~= '' then
  trim_log(KEYS[4], KEYS[6], KEYS[7], ARGV[12])
  redis.call('HSET', st, 'trimmed_ms', ARGV[14])
end
return {1, redis.call('HGETALL', st), redis.call('LRANGE', days, 0, -1)}
"""
)

# KEYS: state, weeks, done. ARGV: expected refresh_seq, mid, overview, week ('' = none),
# week JSON, long, weeks_max, now (ISO), expected epoch.
# Applies a tier refresh computed from the days list as of refresh_seq; appends a week once.
# Returns {1, new state}, 0 (nothing pending) or -1 (the days list changed: recompute).
APPLY_REFRESH = """
local st, weeks, done = KEYS[1], KEYS[2], KEYS[3]
if redis.call('HGET', st, 'refresh_pending') ~= '1' then return 0 end
if (redis.call('HGET', st, 'refresh_seq') or '0') ~= ARGV[1] then return -1 end
if (redis.call('HGET', st, 'epoch') or '0') ~= ARGV[9] then return -1 end
local week = ARGV[4]
if week ~= '' then
  if redis.call('SISMEMBER', done, 'week:' .. week) == 0 then
    if ARGV[5] ~= '' then
      redis.call('RPUSH', weeks, ARGV[5])
      redis.call('LTRIM', weeks, -tonumber(ARGV[7]), -1)
    end
    redis.call('SADD', done, 'week:' .. week)
    if ARGV[6] ~= '' then redis.call('HSET', st, 'long', ARGV[6]) end
  end
  if redis.call('HGET', st, 'week_pending') == week then
    redis.call('HSET', st, 'week_pending', '')
  end
end
redis.call('HSET', st, 'mid', ARGV[2], 'overview', ARGV[3], 'tiers_at', ARGV[8],
  'refresh_pending', 0, 'failures', 0, 'retry_at', 0)
return {1, redis.call('HGETALL', st)}
"""

# KEYS: state, facts. ARGV: fact ops (JSON list). Facts about a person, in their scope.
# Returns the ids of the new facts.
WRITE_FACTS = (
    CONSUME
    + """
return write_facts(KEYS[1], KEYS[1], KEYS[2], ARGV[1])
"""
)

# KEYS: every key of one scope, its state first. Deletes them all but the forget generation
# and the fact counter: the state keeps a moved epoch, so a summary computed from the
# forgotten memory at this moment is refused (its compare-and-set expects the old epoch)
# instead of writing it back, and its fact counter, so no fact id is ever given twice (a
# /memory why record naming an old id never shows a new fact in its place).
FORGET_SCOPE = """
local epoch = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
local seq = redis.call('HGET', KEYS[1], 'fact_seq')
local deleted = redis.call('DEL', unpack(KEYS))
-- A scope that never held anything has no summary in flight: leave no key behind.
if deleted > 0 then
  redis.call('HSET', KEYS[1], 'epoch', epoch + 1)
  if seq then redis.call('HSET', KEYS[1], 'fact_seq', seq) end
end
return deleted
"""

# KEYS: forgets, state. ARGV: the finished request ('' = none). Crosses a finished forget
# off and clears the pending flag only if no other forget was written down meanwhile.
END_FORGET = """
if ARGV[1] ~= '' then redis.call('LREM', KEYS[1], 1, ARGV[1]) end
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('HSET', KEYS[2], 'forgets_pending', 0) end
return 1
"""


# KEYS: forgets, state. ARGV: the request, the epoch it was decided at. Writes a change down
# (as begin_forget does) only if nothing was forgotten since: the epoch has not moved and no
# forget is pending. Background work (an image's caption) cannot bring back what a forget
# took away while it ran. Returns 1 written, 0 refused.
BEGIN_FORGET_AT = (
    "local st = KEYS[2]"
    + nothing_forgotten_since("st", "KEYS[1]", "ARGV[2]")
    + """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('HINCRBY', st, 'epoch', 1)
redis.call('HSET', st, 'forgets_pending', 1)
return 1
"""
)

# KEYS: state, forgets, why. ARGV: the answer's record (JSON), its TTL (ms), the epoch its
# prompt was read at. Stores what an answer used (/memory why) only if nothing was forgotten
# since (the epoch has not moved, no forget is pending): a forget racing an answer cannot
# leave a record of the text it removed. Returns 1 written, 0 refused.
PUT_ANSWER_RECORD = (
    "local st = KEYS[1]"
    + nothing_forgotten_since("st", "KEYS[2]", "ARGV[3]")
    + """
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
return 1
"""
)

# KEYS: a subtree's ledger, its thread starters. ARGV: the thread's id, the record, the
# ledger's version it was checked against, its time to live (ms). A thread's first message
# as its platform shows it (memory_core.store.thread_starters), kept only if nothing was
# forgotten in the subtree since it was checked. Returns 1 kept, 0 refused.
KEEP_STARTER = """
if (redis.call('HGET', KEYS[1], 'v') or '0') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""

# KEYS: state, log. Re-derives the counters from the log after messages were deleted: the
# unsummarised messages (after short_upto) and their tokens, and the log's length, in one
# step, so a message stored at the same moment is counted, not overwritten.
RESYNC_COUNTERS = """
local st = KEYS[1]
if (redis.call('HGET', st, 'day') or '') == '' then return 0 end
local upto = redis.call('HGET', st, 'short_upto') or ''
local start = upto == '' and '-' or '(' .. upto
local tokens, count = 0, 0
for _, e in ipairs(redis.call('XRANGE', KEYS[2], start, '+')) do
  for i = 1, #e[2], 2 do
    if e[2][i] == 'k' then tokens = tokens + (tonumber(e[2][i + 1]) or 0) end
  end
  count = count + 1
end
redis.call('HSET', st, 'unsum_tokens', tokens, 'unsum_count', count,
  'msg_count', redis.call('XLEN', KEYS[2]))
return 1
"""

# KEYS: log, rewrite. ARGV: the id copied last ('' = none yet: start afresh), how many.
# A slice of rewriting a log without the entries XDEL only flagged (their bytes stay in the
# stream's nodes, and in every DUMP, RDB and AOF of it): the next entries, ids and fields as
# they are, into the rewrite. Returns {the last id copied, 1 when the log has no more}.
REWRITE_LOG_SLICE = """
if ARGV[1] == '' then redis.call('DEL', KEYS[2]) end
local start = ARGV[1] == '' and '-' or '(' .. ARGV[1]
local batch = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', tonumber(ARGV[2]))
for _, e in ipairs(batch) do redis.call('XADD', KEYS[2], e[1], unpack(e[2])) end
local last = #batch > 0 and batch[#batch][1] or ARGV[1]
return {last, #batch < tonumber(ARGV[2]) and 1 or 0}
"""

# KEYS: log, rewrite. ARGV: the id copied last. The rewrite's last step, atomic: what was
# stored since the last slice is copied too; the rewrite takes the log's place, keeping
# what the stream knows of its past (its last id, entries added, the greatest deleted id:
# no id is ever given twice). Refused (0, the rewrite dropped) when the log lost entries
# since the slices copied them (another forget): the caller starts again.
REWRITE_LOG_FINISH = """
local start = ARGV[1] == '' and '-' or '(' .. ARGV[1]
for _, e in ipairs(redis.call('XRANGE', KEYS[1], start, '+')) do
  redis.call('XADD', KEYS[2], e[1], unpack(e[2]))
end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]); return 1 end
if redis.call('XLEN', KEYS[2]) ~= redis.call('XLEN', KEYS[1]) then
  redis.call('DEL', KEYS[2])
  return 0
end
if redis.call('XLEN', KEYS[1]) == 0 then
  -- Every entry gone: no node is left to hold their bytes; the empty log keeps its ids.
  redis.call('DEL', KEYS[2])
  return 1
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local meta = {}
for i = 1, #info, 2 do meta[info[i]] = info[i + 1] end
redis.call('XSETID', KEYS[2], meta['last-generated-id'],
  'ENTRIESADDED', meta['entries-added'], 'MAXDELETEDID', meta['max-deleted-entry-id'])
redis.call('RENAME', KEYS[2], KEYS[1])
return 1
"""

# KEYS: log. ARGV: a user id. How many messages of the log that user wrote (the App Home's
# "what is kept about you"), counted where the log is, a slice at a time.
COUNT_BY = """
local n, start = 0, '-'
while true do
  local batch = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 500)
  for _, e in ipairs(batch) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'u' then
        if f[i + 1] == ARGV[1] then n = n + 1 end
        break
      end
    end
  end
  if #batch < 500 then return n end
  start = '(' .. batch[#batch][1]
end
"""

SCRIPTS: dict[str, str] = {
    "ingest": INGEST,
    "advance_short": ADVANCE_SHORT,
    "close_day": CLOSE_DAY,
    "trim_log": TRIM_LOG,
    "store_vectors": STORE_VECTORS,
    "recall_sync": RECALL_SYNC,
    "recall_window": RECALL_WINDOW,
    "apply_refresh": APPLY_REFRESH,
    "write_facts": WRITE_FACTS,
    "forget_scope": FORGET_SCOPE,
    "end_forget": END_FORGET,
    "begin_forget_at": BEGIN_FORGET_AT,
    "resync_counters": RESYNC_COUNTERS,
    "put_answer_record": PUT_ANSWER_RECORD,
    "keep_starter": KEEP_STARTER,
    "count_by": COUNT_BY,
    "rewrite_log_slice": REWRITE_LOG_SLICE,
    "rewrite_log_finish": REWRITE_LOG_FINISH,
    **FLEET_SCRIPTS,
    **LEARNING_SCRIPTS,
}
SHAS: dict[str, str] = {
    name: hashlib.sha1(src.encode()).hexdigest() for name, src in SCRIPTS.items()
}


async def load_scripts(client: Any) -> None:
    for source in SCRIPTS.values():
        await client.script_load(source)


async def run_script_by(
    lane: FastLane | None, client: Any, name: str, keys: Sequence[str], args: Sequence[Any]
) -> Any:
    """:func:`run_script` by the store's own connection where there is one (one server):
    the same raw reply, without redis-py's Python per command."""
    if lane is None:
        return await run_script(client, name, keys, args)
    try:
        return await lane.call("EVALSHA", SHAS[name], len(keys), *keys, *args)
    except NoScriptError:
        return await lane.call("EVAL", SCRIPTS[name], len(keys), *keys, *args)


async def run_script(client: Any, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
    """EVALSHA, loading the script once if the server forgot it (restart, failover, FLUSH)."""
    try:
        return await client.evalsha(SHAS[name], len(keys), *keys, *args)
    except NoScriptError:
        await client.script_load(SCRIPTS[name])
        return await client.evalsha(SHAS[name], len(keys), *keys, *args)
