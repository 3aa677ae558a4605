-- A producer's second step for a job with ``after``, in the dependent's shard: the version waits here until
-- every dependency that had versions to wait for is released (docs/dependencies.md); with none, it is queued
-- at once (merge rule "new job").
-- ARGV[1] = id, ARGV[2] = wait (the version's unique name), ARGV[3] = perform_in ('' : now),
-- ARGV[4] = payload, ARGV[5] = score ('' : now), ARGV[6] = group ('' : none), ARGV[7], ARGV[8] = the wake
-- channel and message, ARGV[9] = history_length, ARGV[10] = the job's tags (msgpack; '' : none),
-- ARGV[11..] = worker, id of each dependency watched
-- Returns 1 when the version waits, 0 when it was queued.
local id, wait = ARGV[1], ARGV[2]
local _, now = server_clock()
local perform_in = tonumber(ARGV[3]) or now
local score = tonumber(ARGV[5]) or now
local pending = {}
for i = 11, #ARGV, 2 do
  -- a release that came before this step (the dependency was performed in between)
  if redis.call('ZREM', K_DEP_EARLY, wait .. '\0' .. ARGV[i] .. '\0' .. ARGV[i + 1]) == 0 then
    pending[#pending + 1] = ARGV[i]
    pending[#pending + 1] = ARGV[i + 1]
  end
end
if #pending > 0 then
  local field = redis.call('HGET', K_DEP_PARKED, id)
  local parkings = field and cmsgpack.unpack(field) or {}
  if #parkings >= DEP_MAX then
    return redis.error_reply('AFTER_LIMIT id ' .. id .. ' already has ' .. DEP_MAX ..
      ' versions waiting (after); nothing of this job was written')
  end
  parkings[#parkings + 1] = { wait, num(perform_in), ARGV[4], score, ARGV[6], pending, now, ARGV[10] }
  redis.call('HSET', K_DEP_PARKED, id, cmsgpack.pack(parkings))
  return 1
end
local head = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
local arrived = depend_enqueue(id, perform_in, ARGV[4], score, ARGV[6], ARGV[10])
history_add(history_length(ARGV[9]), 'enq', { { arrived }, 0 })
if arrived[3] == 'new' and (#head == 0 or perform_in < secs(head[2])) then
  redis.call('PUBLISH', ARGV[7], ARGV[8])
end
return 0
