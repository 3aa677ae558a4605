-- Groups: the fair rotation of a shard's tenants (docs/fairness.md).

-- Fairness (docs/fairness.md). A shard that holds grouped ids indexes them again: K_GREADY (the grouped
-- part of K_READY, same scores), K_GLEX (each group's ids oldest due first), K_GROUPS (group -> max(its
-- oldest perform_in, its last turn); "" is the default group) and K_GTURNS. A score in K_GROUPS may be
-- low (a group's head left), never high: the take corrects a low one when it reaches it.
local LAST_TURN = '\0last'

-- A double as 8 bytes that sort bytewise as the numbers do (0 with the positives: its bytes are all
-- 0, and flipped like a negative's they would sort after every group's range).
local function sortable(x)
  if x == 0 then x = 0 end
  local s = struct.pack('>d', x)
  if x >= 0 then return string.char(s:byte(1) + 128) .. s:sub(2) end
  local out = {}
  for i = 1, 8 do out[i] = string.char(255 - s:byte(i)) end
  return table.concat(out)
end

local function group_prefix(group)
  return struct.pack('>H', #group) .. group
end

-- ``group`` got a job due at ``perform_in``: its score drops to max(perform_in, its turn) if lower.
-- A paused group (K_GPAUSED) stays out of the rotation: its ids wait in their indexes until a resume.
local function group_due(group, perform_in)
  if group ~= '' and redis.call('HEXISTS', K_GPAUSED, group) == 1 then return end
  local turn = redis.call('HGET', K_GTURNS, group)
  if turn then perform_in = math.max(perform_in, tonumber(turn)) end
  redis.call('ZADD', K_GROUPS, 'LT', num(perform_in), group)
end

-- K_GLENGTHS: group -> how many ids it has queued in this shard, the console's depth per group. It moves
-- exactly where an id enters or leaves K_GREADY (group_put, group_drop), so it always equals a count of
-- K_GROUP_OF over the queued ids, and a read of the biggest groups is one ZREVRANGE. A group at 0 leaves it.
local function group_count(group, by)
  if tonumber(redis.call('ZINCRBY', K_GLENGTHS, by, group)) <= 0 then redis.call('ZREM', K_GLENGTHS, group) end
end

-- Grouped ``id`` is queued at ``perform_in`` now (its former place, if any, is forgotten).
local function group_put(id, group, perform_in)
  local prefix = group_prefix(group)
  local old = redis.call('ZSCORE', K_GREADY, id)
  if old then
    redis.call('ZREM', K_GLEX, prefix .. sortable(secs(old)) .. id)
  else
    group_count(group, 1)  -- a move inside the queue (debounce, perform now, a merge) counts nothing
  end
  -- K_GREADY holds K_READY's score as written (its unit too); K_GLEX and K_GROUPS hold seconds, read back
  -- from that score, so that the id's removal finds the same member
  local stored = time_score(perform_in)
  redis.call('ZADD', K_GREADY, stored, id)
  redis.call('ZADD', K_GLEX, 0, prefix .. sortable(secs(stored)) .. id)
  group_due(group, perform_in)
end

-- Grouped ``id`` left the queue.
local function group_drop(id, group)
  local old = redis.call('ZSCORE', K_GREADY, id)
  if not old then return end
  redis.call('ZREM', K_GREADY, id)
  redis.call('ZREM', K_GLEX, group_prefix(group) .. sortable(secs(old)) .. id)
  group_count(group, -1)
end

-- ``id`` was (re)queued at ``perform_in``: keep the fairness indexes in step. Two reads in a shard
-- that holds no grouped id.
local function group_requeued(id, perform_in)
  local group = redis.call('HGET', K_GROUP_OF, id)
  if group then
    -- a shard's first grouped id: whatever it holds already joins the rotation as the default group
    -- (score 0 is low, as allowed: the take corrects it, or drops it when the group is empty)
    if redis.call('EXISTS', K_GROUPS) == 0 then redis.call('ZADD', K_GROUPS, 0, '') end
    group_put(id, group, perform_in)
  elseif redis.call('EXISTS', K_GROUPS, K_GREADY) > 0 then  -- every group paused: K_GROUPS is gone, not K_GREADY
    group_due('', perform_in)
  end
end

-- An id keeps its group while any copy of it is queued, in processing or in the morgue (a copy in
-- processing needs it for its way back, a dead one for its requeue). The flags name the places to look
-- at: the one the caller just removed the id from is not among them.
local function group_forget(id, queued, processing, morgue)
  if queued and redis.call('HEXISTS', K_PAYLOADS, id) == 1 then return end
  if processing and redis.call('HEXISTS', K_PROCESSING, id) == 1 then return end
  if morgue and redis.call('HEXISTS', K_M_PAYLOADS, id) == 1 then return end
  redis.call('HDEL', K_GROUP_OF, id)
end
