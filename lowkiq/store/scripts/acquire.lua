-- Take the shard's lease. A lease held by another member and not yet expired is refused.
-- An expired one is taken over, and its owner's in-flight batch goes back to the queue
-- (at least once) in the same step: each restored job counts one crash, and a job whose
-- owner died performing it ``crash_limit`` times goes to the morgue instead, all its payloads.
-- ARGV[1] = member id, ARGV[2] = grant, ARGV[3] = ttl in ms, ARGV[4] = crash_limit,
-- ARGV[5] = now (the morgue's updated_at), ARGV[6] = the error a crashed job gets in the morgue
-- Returns {1, epoch, cfg_epoch, restored, {ids moved to the morgue}, fence} when granted,
--         {0, owner, ms left} when held by someone else.
-- The grant's fencing token is (cfg_epoch, fence); see "The fencing token" below.
local member, grant, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local crash_limit, now, crash_error = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local now_ms = math.floor(now_us / 1000)
local lease = redis.call('HMGET', K_LEASE, 'state', 'owner', 'expires_ms')
local state, owner, expires_ms = lease[1], lease[2], tonumber(lease[3] or 0)
if state == 'held' and expires_ms >= now_ms then
  return { 0, owner, expires_ms - now_ms }
end

-- A batch left in processing: its owner stopped renewing (crash, pause, partition), or a
-- server of a version without leases was stopped mid-batch. Only a takeover from another
-- member counts as a crash of its jobs.
local crashed = state == 'held' and owner ~= member
local morgued, back = {}, {}
local records = redis.call('HGETALL', K_PROCESSING)
for i = 1, #records, 2 do
  local id = records[i]
  local retry_count, perform_in, err, payloads = cmsgpack.unpack(records[i + 1])
  local crashes = 0
  if crashed then crashes = redis.call('HINCRBY', K_CRASHES, id, 1) end
  if crashes >= crash_limit then
    morgue_put(id, payloads, now, crash_error)
    redis.call('HDEL', K_CRASHES, id)
    morgued[#morgued + 1] = id
  else
    queue_put(id, payloads, perform_in, retry_count, err, false)
    back[#back + 1] = id
  end
end
if #records > 0 then redis.call('DEL', K_PROCESSING) end
if #morgued > 0 then redis.call('HINCRBY', K_COUNTERS, 'failed', #morgued) end

-- Queues written before retried ids had their own id index list them as fresh: move them, once.
-- (layout 3, integer microsecond scores, comes after: scores_migrate.lua)
local layout = redis.call('HGET', K_LEASE, 'layout')
if layout ~= '2' and layout ~= '3' then
  local retried = redis.call('ZRANGE', K_RETRIES, 0, -1)
  if #retried > 0 then
    call_chunked('ZREM', K_LEX, retried, 1)
    local scored = {}
    for _, id in ipairs(retried) do
      scored[#scored + 1] = 0
      scored[#scored + 1] = id
    end
    call_chunked('ZADD', K_RLEX, scored, 2)
  end
  redis.call('HSET', K_LEASE, 'layout', '2')
end

-- The fencing token (cfg_epoch, fence) must exceed every token given before for any shard an id
-- ever lived in: this shard's earlier grants, the shards of the queue's previous layout (the
-- floor --change-layout wrote into this hash, see fence_floor.lua), and those of a Redis that
-- lost its keys (FLUSHALL, a restart without persistence), where nothing stored survived.
--   cfg_epoch: Redis Cluster's current epoch (0 outside a cluster), never below the stored one.
--     Every failover and slot move raises it cluster-wide, and it survives FLUSHALL.
--   fence: one more than the stored fence, and at least Redis's clock in microseconds. The clock
--     is what survives key loss; the stored value keeps the token rising on this shard even when
--     the clock stepped back (a failover to a replica whose clock is behind). One grant takes
--     longer than a microsecond, so one shard's grants alone never run ahead of the clock.
local cfg_epoch = tonumber(redis.call('HGET', K_LEASE, 'cfg_epoch') or 0) or 0
local info = redis.pcall('CLUSTER', 'INFO')
if type(info) == 'string' then
  local current = tonumber(string.match(info, 'cluster_current_epoch:(%d+)')) or 0
  if current > cfg_epoch then cfg_epoch = current end
end
local fence = math.max((tonumber(redis.call('HGET', K_LEASE, 'fence')) or 0) + 1, now_us)
local epoch = redis.call('HINCRBY', K_LEASE, 'epoch', 1)
-- '%.0f': all the digits of a number up to 2^53 (Redis would write 1.7e+15).
redis.call('HSET', K_LEASE, 'state', 'held', 'owner', member, 'grant', grant,
  'cfg_epoch', string.format('%.0f', cfg_epoch), 'fence', string.format('%.0f', fence),
  'expires_ms', now_ms + ttl, 'acquired_ms', now_ms)
redis.call('HDEL', K_LEASE, 'thread', 'taken_ms', 'performing')
if #records > 0 then
  -- the new holder's entry, as history_held() writes one (no thread of it has taken a batch yet)
  history_add(history_length(), 'over', { member, string.format('%.0f:%.0f', cfg_epoch, fence), false,
    owner or false, crashed, back, morgued })
end
return { 1, epoch, cfg_epoch, #back, morgued, fence }
