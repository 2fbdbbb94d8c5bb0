"""The Lua of learning a channel's past (:mod:`memory_core.store.learning`) and of the
erasure ledger its writes check (:mod:`memory_core.store.ledger`)."""

from __future__ import annotations

from memory_core.store.lua_common import CONSUME, nothing_forgotten_since

# KEYS: log, rewrite, state, ids, ledger. ARGV: the id the slices copied last, how many past
# entries the rewrite was seeded with, the last past entry's id, its time (ms), the erasure
# ledger's version the entries were checked at, then each past entry's platform id and time
# (ms), noted as stored in the same step.
# Refused (-1, the rewrite dropped) when the ledger moved since: something was forgotten
# meanwhile, and the entries are checked against it again before they are put in place.
# The last step of putting a place's past before its log: the log's entries stored since
# the last slice are copied too, and the rewrite (the past, then the log) takes the log's
# place, keeping what the stream knows of its own past (no id is ever given twice).
# Refused (0, the rewrite dropped) when the log lost entries since the slices copied them
# (a forget): the caller starts again. The state: the past is summarised by its own day
# records, so the open day's summary starts after it (short_upto); the epoch moves (a
# recall index or a summary made from the log before is made again).
PREPEND_FINISH = """
local log, rewrite, st, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if (redis.call('HGET', KEYS[5], 'v') or '0') ~= ARGV[5] then
  redis.call('DEL', rewrite)
  return -1
end
local extra = tonumber(ARGV[2])
local present = redis.call('EXISTS', log) == 1
if present then
  local start = ARGV[1] == '' and '-' or '(' .. ARGV[1]
  for _, e in ipairs(redis.call('XRANGE', log, start, '+')) do
    redis.call('XADD', rewrite, e[1], unpack(e[2]))
  end
  if redis.call('XLEN', rewrite) ~= redis.call('XLEN', log) + extra then
    redis.call('DEL', rewrite)
    return 0
  end
  local info = redis.call('XINFO', 'STREAM', log)
  local meta = {}
  for i = 1, #info, 2 do meta[info[i]] = info[i + 1] end
  redis.call('XSETID', rewrite, meta['last-generated-id'],
    'ENTRIESADDED', meta['entries-added'] + extra, 'MAXDELETEDID', meta['max-deleted-entry-id'])
end
redis.call('RENAME', rewrite, log)
local s = redis.call('HMGET', st, 'short_upto', 'last_ms', 'created_ms')
if not s[1] or s[1] == '' then redis.call('HSET', st, 'short_upto', ARGV[3]) end
if tonumber(s[2] or '0') < tonumber(ARGV[4]) then redis.call('HSET', st, 'last_ms', ARGV[4]) end
if not s[3] then redis.call('HSET', st, 'created_ms', ARGV[4]) end
redis.call('HINCRBY', st, 'msg_count', extra)
redis.call('HINCRBY', st, 'epoch', 1)
for i = 6, #ARGV, 2 do redis.call('ZADD', ids, ARGV[i + 1], ARGV[i]) end
return 1
"""

# KEYS: a list of JSON records (days or weeks), done, state, forgets[, a second list: the day
# records beside the days]. ARGV: the records' field that orders them ('day' or 'week'), the
# marker of one closed live ('day:', 'week:'), the marker of one learned into the list, how
# many the list keeps, the epoch the records were made at, the second list's learned marker
# and how many it keeps, then the records. Refused (-1) when anything was forgotten since
# the records were made (the epoch moved, or a forget is pending): they may hold it. Else
# each record neither closed live nor learned before is put in its place among the list's,
# oldest first, and marked; a list keeps its newest. Returns how many went in the first.
INSERT_RECORDS = """
local done, st, field, closed = KEYS[2], KEYS[3], ARGV[1], ARGV[2]
if (redis.call('HGET', st, 'epoch') or '0') ~= ARGV[5] then return -1 end
if redis.call('HGET', st, 'forgets_pending') == '1' or redis.call('LLEN', KEYS[4]) > 0 then
  return -1
end
local function insert(list, learned, keep)
  local all, added = {}, 0
  for _, raw in ipairs(redis.call('LRANGE', list, 0, -1)) do
    all[#all + 1] = {cjson.decode(raw)[field] or '', raw}
  end
  for i = 8, #ARGV do
    local key = cjson.decode(ARGV[i])[field]
    if redis.call('SISMEMBER', done, closed .. key) == 0
      and redis.call('SADD', done, learned .. key) == 1 then
      all[#all + 1] = {key, ARGV[i]}
      added = added + 1
    end
  end
  if added == 0 then return 0 end
  table.sort(all, function(a, b) return a[1] < b[1] end)
  redis.call('DEL', list)
  for i = math.max(1, #all - keep + 1), #all do redis.call('RPUSH', list, all[i][2]) end
  return added
end
local added = insert(KEYS[1], ARGV[3], tonumber(ARGV[4]))
if KEYS[5] then insert(KEYS[5], ARGV[6], tonumber(ARGV[7])) end
return added
"""

# KEYS: state, facts, forgets. ARGV: fact ops (JSON list), the epoch they were made at.
# Facts a learn's summaries made of the place's past: written only if nothing was forgotten
# since (the epoch has not moved, no forget is pending). Returns 1 written, 0 refused.
WRITE_FACTS_AT = (
    CONSUME
    + "local st = KEYS[1]"
    + nothing_forgotten_since("st", "KEYS[3]", "ARGV[2]")
    + """
write_facts(st, st, KEYS[2], ARGV[1])
return 1
"""
)

# KEYS: state, forgets. ARGV: the epoch, then field, value, ... State fields made from what
# was read at that epoch (a learned past's long-term tier): written only if nothing was
# forgotten since. Returns 1 written, 0 refused.
SET_FIELDS_AT = (
    "local st = KEYS[1]"
    + nothing_forgotten_since("st", "KEYS[2]", "ARGV[1]")
    + """
redis.call('HSET', st, unpack(ARGV, 2))
return 1
"""
)

# KEYS: a ledger (memory_core.store.gone), and for a place's, its subtree's thread starters.
# ARGV: field, time (ms), ... Each tombstone keeps the later of its two times (it never moves
# back), and the ledger's version moves, so a writer that checked against the ledger before
# this re-checks before it writes. The thread starters read from the platform go with any
# tombstone (they are read again, and checked, at the next reply).
LEDGER_LATER = """
for i = 1, #ARGV, 2 do
  local now = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i + 1]) > now then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
if KEYS[2] then redis.call('DEL', KEYS[2]) end
return redis.call('HINCRBY', KEYS[1], 'v', 1)
"""

# KEYS: the learn's job, staged, texts, the erasure ledger. ARGV: the ledger's version the
# page was checked at, the source's cursor after the page, how many counts, then each count's
# name and value, then each message's member, time (ms) and JSON.
# One page of a learn's reading kept, only while the learn is still reading (a forget drops
# it: 0) and the ledger is as the page was checked against (-1: check it again): what a
# forget took is never kept for a later confirm. Returns 1 kept.
STAGE_PAGE = """
local job, staged, texts = KEYS[1], KEYS[2], KEYS[3]
if redis.call('HGET', job, 'status') ~= 'reading' then return 0 end
if (redis.call('HGET', KEYS[4], 'v') or '0') ~= ARGV[1] then return -1 end
local n = tonumber(ARGV[3])
for i = 4, 3 + 2 * n, 2 do
  if tonumber(ARGV[i + 1]) ~= 0 then redis.call('HINCRBY', job, ARGV[i], ARGV[i + 1]) end
end
for i = 4 + 2 * n, #ARGV, 3 do
  redis.call('HSET', texts, ARGV[i], ARGV[i + 2])
  redis.call('ZADD', staged, ARGV[i + 1], ARGV[i])
end
redis.call('HSET', job, 'cursor', ARGV[2])
return 1
"""

LEARNING_SCRIPTS = {
    "stage_page": STAGE_PAGE,
    "prepend_finish": PREPEND_FINISH,
    "insert_records": INSERT_RECORDS,
    "write_facts_at": WRITE_FACTS_AT,
    "set_fields_at": SET_FIELDS_AT,
    "ledger_later": LEDGER_LATER,
}
