-- Delivers one release into the dependent's shard: its waiting version stops waiting on that dependency,
-- and joins the queue (merge rule "new job") once it waits on none (docs/dependencies.md). Idempotent: a
-- release delivered twice finds nothing the second time. A release that comes before its version was
-- parked (the dependency was performed between the producer's two steps) is kept for the park step.
-- ARGV[1] = id, ARGV[2] = wait, ARGV[3], ARGV[4] = the dependency's worker and id,
-- ARGV[5], ARGV[6] = the wake channel and message
-- Returns 'queued', 'waiting' (on other dependencies) or 'early' (no such waiting version yet).
local id, wait, worker, dep = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local _, now = server_clock()
local field = redis.call('HGET', K_DEP_PARKED, id)
local parkings = field and cmsgpack.unpack(field) or {}
local at = nil
for i, parking in ipairs(parkings) do
  if parking[1] == wait then at = i end
end
if not at then
  redis.call('ZADD', K_DEP_EARLY, num(now), wait .. '\0' .. worker .. '\0' .. dep)
  local old = redis.call('ZRANGEBYSCORE', K_DEP_EARLY, '-inf', num(now - DEP_EARLY_HORIZON), 'LIMIT', 0, 16)
  if #old > 0 then redis.call('ZREM', K_DEP_EARLY, unpack(old)) end
  return 'early'
end
local parking = parkings[at]
local pending, left = parking[6], {}
for i = 1, #pending, 2 do
  if not (pending[i] == worker and pending[i + 1] == dep) then
    left[#left + 1] = pending[i]
    left[#left + 1] = pending[i + 1]
  end
end
if #left > 0 then
  parking[6] = left
  redis.call('HSET', K_DEP_PARKED, id, cmsgpack.pack(parkings))
  return 'waiting'
end
table.remove(parkings, at)
if #parkings == 0 then
  redis.call('HDEL', K_DEP_PARKED, id)
else
  redis.call('HSET', K_DEP_PARKED, id, cmsgpack.pack(parkings))
end
-- due when released, or later if it was enqueued for later
local perform_in = math.max(tonumber(parking[2]), now)
local head = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
local arrived = depend_enqueue(id, perform_in, parking[3], parking[4], parking[5], parking[8])
history_add(history_length(), 'enq', { { arrived }, 0 })
if arrived[3] == 'new' and (#head == 0 or perform_in < secs(head[2])) then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return 'queued'
