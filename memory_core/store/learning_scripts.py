"""The Lua of learning a channel's past (:mod:`memory_core.store.learning`)."""

from __future__ import annotations

# KEYS: log, rewrite, state, ids. ARGV: the id the slices copied last, how many past entries
# the rewrite was seeded with, the last past entry's id, its time (ms), then each past
# entry's platform id and time (ms), noted as stored in the same step.
# The last step of putting a place's past before its log: the log's entries stored since
# the last slice are copied too, and the rewrite (the past, then the log) takes the log's
# place, keeping what the stream knows of its own past (no id is ever given twice).
# Refused (0, the rewrite dropped) when the log lost entries since the slices copied them
# (a forget): the caller starts again. The state: the past is summarised by its own day
# records, so the open day's summary starts after it (short_upto); the epoch moves (a
# recall index or a summary made from the log before is made again).
PREPEND_FINISH = """
local log, rewrite, st, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
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
for i = 5, #ARGV, 2 do redis.call('ZADD', ids, ARGV[i + 1], ARGV[i]) end
return 1
"""

# KEYS: a list of JSON records (days, day records or weeks), done. ARGV: the records' field
# that orders them ('day' or 'week'), the marker of one closed live ('day:', 'week:'), the
# marker of one learned into this list, how many the list keeps, then the records. Each
# record neither closed live nor learned before is put in its place among the list's,
# oldest first, and marked; the list keeps its newest. Returns how many went in.
INSERT_RECORDS = """
local list, done, field = KEYS[1], KEYS[2], ARGV[1]
local closed, learned, keep = ARGV[2], ARGV[3], tonumber(ARGV[4])
local all, added = {}, 0
for _, raw in ipairs(redis.call('LRANGE', list, 0, -1)) do
  all[#all + 1] = {cjson.decode(raw)[field] or '', raw}
end
for i = 5, #ARGV do
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
"""

LEARNING_SCRIPTS = {"prepend_finish": PREPEND_FINISH, "insert_records": INSERT_RECORDS}
