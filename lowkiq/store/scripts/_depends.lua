-- Dependencies across ids (docs/dependencies.md): the last of the libraries (lowkiq.store.lua.LIBRARIES).
-- Two sides, each in its own shard's slot:
-- * a dependency's shard keeps, per id, the watches producers recorded on it (K_DEP_WATCH: id -> msgpack
--   {acks, {target, since, queue, shard, id, wait, worker}, ...}) and, once a watch is settled, a release
--   to deliver (K_DEP_OUTBOX, a stream the holder of the shard's lease delivers);
-- * a dependent's shard keeps its waiting versions (K_DEP_PARKED: id -> msgpack {parking, ...}, a parking
--   being {wait, perform_in, payload, score, group, {worker, id, ...} still pending, since}) and releases
--   that came before their parking (K_DEP_EARLY, pruned after a day).
-- At most this many watches on one id and waiting versions of one id: each costs a decode of its list.
local DEP_MAX = 1000
local DEP_EARLY_HORIZON = 86400

-- A watch is settled when the versions it waits for are performed or deleted: as many acknowledgements of
-- the id as it had copies (queued, in processing, waiting) when it was recorded, or none of its copies left
-- (copies merge: a failed batch joins the queued copy), and none still waiting for its own dependencies; and
-- not while the id is in the morgue with a failure newer than the watch (a watched version died there).
local function depend_settle(id, record)
  local acks = record[1]
  local queued = redis.call('HEXISTS', K_PAYLOADS, id) == 1
  local processing = redis.call('HEXISTS', K_PROCESSING, id) == 1
  local waiting = redis.call('HEXISTS', K_DEP_PARKED, id) == 1
  local dead_at = redis.call('ZSCORE', K_M_UPDATED, id)
  dead_at = dead_at and secs(dead_at)
  local kept = { acks }
  for i = 2, #record do
    local w = record[i]
    local done = not waiting and (acks >= w[1] or not (queued or processing)) and not (dead_at and dead_at >= w[2])
    if done then
      redis.call('XADD', K_DEP_OUTBOX, '*', 'q', w[3], 's', w[4], 'i', w[5], 'w', w[6], 'dw', w[7], 'di', id)
    else
      kept[#kept + 1] = w
    end
  end
  if #kept == 1 then
    redis.call('HDEL', K_DEP_WATCH, id)
  else
    redis.call('HSET', K_DEP_WATCH, id, cmsgpack.pack(kept))
  end
end

-- Ids that left this shard's processing acknowledged (performed) or were deleted by an operator
-- (``acked`` false): their settled watches become releases. One EXISTS when the shard has no watch.
local function depend_settled(ids, acked)
  if #ids == 0 or redis.call('EXISTS', K_DEP_WATCH) == 0 then return end
  for _, id in ipairs(ids) do
    local field = redis.call('HGET', K_DEP_WATCH, id)
    if field then
      local record = cmsgpack.unpack(field)
      if acked then record[1] = record[1] + 1 end
      depend_settle(id, record)
    end
  end
end

-- A waiting version whose dependencies are all released joins the queue (merge rule "new job"), as a
-- push would write it, with its tags (msgpack, or '' or nil: none). Returns the entry of the id's history:
-- {id, 1, 'new' or 'merged', due or false}.
local function depend_enqueue(id, perform_in, payload, score, group, tags)
  local existing = redis.call('HGET', K_PAYLOADS, id)
  payloads_merge(id, existing, { payload, score }, 0)
  if tags and tags ~= '' then tags_add(id, cmsgpack.unpack(tags)) end
  if existing then return { id, 1, 'merged', false } end
  redis.call('ZADD', K_READY, time_score(perform_in), id)
  redis.call('ZADD', K_LEX, 0, id)
  if group and group ~= '' then
    redis.call('HSET', K_GROUP_OF, id, group)
  elseif redis.call('EXISTS', K_GROUP_OF) == 1 then
    redis.call('HDEL', K_GROUP_OF, id)
  end
  group_requeued(id, perform_in)
  return { id, 1, 'new', num(perform_in) }
end
