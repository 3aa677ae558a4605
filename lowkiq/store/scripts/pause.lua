-- Pauses or resumes a queue and records the action in the audit list, in one step.
-- KEYS are PauseKeys.all(): the paused hash, the audit list.
-- ARGV[1] = queue name, ARGV[2] = "pause" or "resume", ARGV[3] = who paused it (JSON, kept while paused),
-- ARGV[4] = the audit entry when the state changed, ARGV[5] = when it did not (JSON without "at"),
-- ARGV[6] = audit entries kept.
-- Returns 1 when the queue's state changed, 0 when it already was so.
local now_ms = server_ms()
local stamp = string.format('%d', now_ms)
local changed
if ARGV[2] == 'pause' then
  changed = redis.call('HSETNX', KEYS[1], ARGV[1], stamp .. ' ' .. ARGV[3])
else
  changed = redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('LPUSH', KEYS[2], stamp .. ' ' .. (changed == 1 and ARGV[4] or ARGV[5]))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[6]) - 1)
return changed
