-- Pauses or resumes one recurring schedule. Its state lives beside its high-water mark, in the slot of
-- its shard, so the tick script sees a pause in the same step as it would enqueue: once this returns,
-- no tick of the schedule is enqueued until it is resumed.
-- KEYS are ScheduleStateKeys.all(): the schedules hash.
-- ARGV[1] = schedule name, ARGV[2] = "pause" or "resume", ARGV[3] = who (JSON, kept while paused).
-- Returns 1 when the schedule's state changed, 0 when it already was so.
local now_ms = server_ms()
local name = ARGV[1]
if ARGV[2] == 'pause' then
  return redis.call('HSETNX', KEYS[1], 'paused:' .. name, string.format('%d', now_ms) .. ' ' .. ARGV[3])
end
local changed = redis.call('HDEL', KEYS[1], 'paused:' .. name)
-- Ticks that came due while paused are missed ticks: the schedule's catch_up decides about them.
if changed == 1 then redis.call('HSET', KEYS[1], 'resumed:' .. name, num(now_ms / 1000)) end
return changed
