"""Pieces of Lua that several scripts share (:mod:`memory_core.store.scripts`,
:mod:`memory_core.store.learning_scripts`)."""

from __future__ import annotations

# Shared by the scripts below: subtract summarised work from the counters, never below zero.
CONSUME = """
local function consume(st, tokens, count)
  -- (0 - x), not -x: Lua would turn -0 into the string "-0", which HINCRBY refuses.
  local t = redis.call('HINCRBY', st, 'unsum_tokens', 0 - tonumber(tokens))
  if t < 0 then redis.call('HSET', st, 'unsum_tokens', 0) end
  local n = redis.call('HINCRBY', st, 'unsum_count', 0 - tonumber(count))
  if n < 0 then redis.call('HSET', st, 'unsum_count', 0) end
end
-- ops: {"new", "", json} | {"upd", id, json} (only if it still exists) | {"del", id, ""}.
-- New ids come from the counter in `counter` (the subtree's root state: a channel's and
-- its threads' facts never share an id; a forget keeps the counter, so none comes back).
-- Returns the ids of the new facts.
-- The scope's own state (`st`) keeps the last id given here: 0 still says "no fact ever".
local function write_facts(counter, st, facts_key, ops_json)
  local made = {}
  if ops_json == '' then return made end
  for _, op in ipairs(cjson.decode(ops_json)) do
    if op[1] == 'new' then
      local n = redis.call('HINCRBY', counter, 'fact_seq', 1)
      if counter ~= st then redis.call('HSET', st, 'fact_seq', n) end
      local id = 'f' .. n
      local fact = cjson.decode(op[3])
      fact['id'] = id
      redis.call('HSET', facts_key, id, cjson.encode(fact))
      made[#made + 1] = id
    elseif op[1] == 'del' then
      redis.call('HDEL', facts_key, op[2])
    elseif redis.call('HEXISTS', facts_key, op[2]) == 1 then
      redis.call('HSET', facts_key, op[2], op[3])
    end
  end
  return made
end
"""


def nothing_forgotten_since(state: str, forgets: str, epoch: str) -> str:
    """The guard of writes made from what was read at ``epoch`` (Lua, returning 0 when
    refused): the epoch has not moved and no forget is pending or written down."""
    return f"""
if (redis.call('HGET', {state}, 'epoch') or '0') ~= {epoch} then return 0 end
if redis.call('HGET', {state}, 'forgets_pending') == '1' or redis.call('LLEN', {forgets}) > 0 then
  return 0
end"""
