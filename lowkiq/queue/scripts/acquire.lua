-- Take the shard's lease. A lease held by another member and not yet expired is refused.
-- An expired one is taken over, and its owner's in-flight batch goes back to the queue
-- (at least once) in the same step: each restored job counts one crash, and a job whose
-- owner died performing it ``crash_limit`` times goes to the morgue instead, all its payloads.
-- ARGV[1] = member id, ARGV[2] = grant, ARGV[3] = ttl in ms, ARGV[4] = crash_limit,
-- ARGV[5] = now (the morgue's updated_at), ARGV[6] = the error a crashed job gets in the morgue
-- Returns {1, epoch, cfg_epoch, restored, {ids moved to the morgue}} when granted,
--         {0, owner, ms left} when held by someone else.
local member, grant, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local crash_limit, now, crash_error = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local now_ms = server_ms()
local lease = redis.call('HMGET', K_LEASE, 'state', 'owner', 'expires_ms')
local state, owner, expires_ms = lease[1], lease[2], tonumber(lease[3] or 0)
if state == 'held' and expires_ms >= now_ms then
  return { 0, owner, expires_ms - now_ms }
end

-- A batch left in processing: its owner stopped renewing (crash, pause, partition), or a
-- server of a version without leases was stopped mid-batch. Only a takeover from another
-- member counts as a crash of its jobs.
local crashed = state == 'held' and owner ~= member
local restored, morgued = 0, {}
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
    restored = restored + 1
  end
end
if #records > 0 then redis.call('DEL', K_PROCESSING) end
if #morgued > 0 then redis.call('HINCRBY', K_COUNTERS, 'failed', #morgued) end

-- Queues written before retried ids had their own id index list them as fresh: move them, once.
if redis.call('HGET', K_LEASE, 'layout') ~= '2' then
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

local cfg_epoch = 0
local info = redis.pcall('CLUSTER', 'INFO')
if type(info) == 'string' then
  cfg_epoch = tonumber(string.match(info, 'cluster_my_epoch:(%d+)')) or 0
end
local epoch = redis.call('HINCRBY', K_LEASE, 'epoch', 1)
redis.call('HSET', K_LEASE, 'state', 'held', 'owner', member, 'grant', grant, 'cfg_epoch', cfg_epoch,
  'expires_ms', now_ms + ttl, 'acquired_ms', now_ms)
redis.call('HDEL', K_LEASE, 'thread', 'taken_ms')
return { 1, epoch, cfg_epoch, restored, morgued }
