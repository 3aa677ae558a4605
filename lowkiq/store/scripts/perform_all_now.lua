-- Make jobs scheduled in the future ready now: a chunk of the shard's ('all', limit: the ones due
-- soonest), or the given ids (see target_ids).
-- ARGV[1] = who acts (an operator's name, for each id's history; '' when unknown)
-- ARGV[2] = now ('' : the Redis server's clock), ARGV[3..] = the targets
-- Returns the number of jobs rescheduled.
local now = clock_now(ARGV[2])
local later
if ARGV[3] == 'all' then
  local limit = tonumber(ARGV[4])
  if us_mode() then
    -- later seconds scores (an older producer's), then later microseconds ones: each in its own unit
    later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. num(now), '(' .. US_AT, 'LIMIT', 0, limit)
    if #later < limit then
      local micro = redis.call('ZRANGEBYSCORE', K_READY, '(' .. us_text(now), '+inf', 'LIMIT', 0, limit - #later)
      for _, id in ipairs(micro) do later[#later + 1] = id end
    end
  else
    later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. num(now), '+inf', 'LIMIT', 0, limit)
  end
else
  later = {}
  for _, id in ipairs(target_ids(3, K_READY)) do
    local score = redis.call('ZSCORE', K_READY, id)
    if score and secs(score) > now then later[#later + 1] = id end
  end
end
local args = {}
local stored = time_score(now)
for _, id in ipairs(later) do
  args[#args + 1] = stored
  args[#args + 1] = id
end
call_chunked('ZADD', K_READY, args, 2)
-- grouped ids move up in their group too
-- grouped ids queued with every group paused: K_GROUPS is gone, K_GREADY holds them
if redis.call('EXISTS', K_GROUPS, K_GREADY) > 0 then
  for _, id in ipairs(later) do group_requeued(id, now) end
end
if #later > 0 then history_add(history_length(), 'op', { ARGV[1], 'perform_now', later }) end
return #later
