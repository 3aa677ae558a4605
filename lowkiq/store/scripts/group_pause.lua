-- Pauses or resumes one group of a worker in one shard (docs/fairness.md, "Pausing a group"). A paused group
-- leaves the rotation (K_GROUPS), so the take never reaches its ids, which keep their place and order in the
-- queue; pushes, retries and restores index them as ever but do not put the group back (group_due).
-- A resume puts it back with a low score, which the take corrects as it does any low score.
-- Touches no processing area: busy ids of the group finish as they run.
-- ARGV[1] = group, ARGV[2] = "pause" or "resume", ARGV[3] = who (JSON, kept while paused),
-- ARGV[4] = wake channel, ARGV[5] = this shard's wake message (a resume wakes its server).
-- Returns 1 when the group's state in this shard changed, 0 when it already was so.
local group = ARGV[1]
if ARGV[2] == 'pause' then
  local changed = redis.call('HSETNX', K_GPAUSED, group, string.format('%d', server_ms()) .. ' ' .. ARGV[3])
  if changed == 1 then redis.call('ZREM', K_GROUPS, group) end
  return changed
end
local changed = redis.call('HDEL', K_GPAUSED, group)
if changed == 1 and redis.call('ZSCORE', K_GLENGTHS, group) then
  redis.call('ZADD', K_GROUPS, 0, group)
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return changed
