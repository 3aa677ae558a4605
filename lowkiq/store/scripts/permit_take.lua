-- Group limits (docs/fairness.md): grant up to all of ``members`` a permit to start now, in order, in the group's
-- own slot. A member is "<queue>:<shard>:<grant>:<id>": one id performing under one lease of its shard.
-- KEYS[1] = the group's permits zset (member -> when the permit ends, ms of Redis time),
-- KEYS[2] = the group's starts zset (the starts of the last period -> when, ms)
-- ARGV[1] = how long a permit lives unless extended, ms (the holder's lease ttl: it ends no earlier than the
--           lease the holder just renewed), ARGV[2] = group_concurrency (0: none), ARGV[3] = the rate limit's
--           count (0: none), ARGV[4] = its period in ms, ARGV[5..] = members, oldest due first
-- Returns {k, free_at_ms, now_ms}: the first k members got a permit (a refused one refuses those after it, so a group
-- starts in order); when k < #members, free_at_ms is when a permit may free (Redis time, ms): exact for the
-- rate limit, the earliest holder's expiry for the concurrency (a release comes sooner).
local holders, starts = KEYS[1], KEYS[2]
local ttl, limit, count, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now_ms = server_ms()
local want = #ARGV - 4
local k = want
if limit > 0 then
  -- A holder that died renews nothing: its permit ends with its lease, when its shard may be taken over.
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', '(' .. now_ms)
  k = math.min(k, limit - redis.call('ZCARD', holders))
end
if count > 0 then
  -- The window is (now - period, now]: a start exactly one period ago still counts (closed windows).
  redis.call('ZREMRANGEBYSCORE', starts, '-inf', '(' .. (now_ms - period))
  k = math.min(k, count - redis.call('ZCARD', starts))
end
if k < 0 then k = 0 end
for i = 1, k do
  local member = ARGV[4 + i]
  if limit > 0 then redis.call('ZADD', holders, now_ms + ttl, member) end
  -- unique per start: the same id may start twice in one period (a retry)
  if count > 0 then redis.call('ZADD', starts, now_ms, member .. '@' .. now_ms .. '#' .. i) end
end
if k > 0 then
  if limit > 0 and redis.call('PTTL', holders) < ttl then redis.call('PEXPIRE', holders, ttl) end
  if count > 0 then redis.call('PEXPIRE', starts, period + 1000) end
end
local free_at = false
if k < want then
  free_at = 0
  if limit > 0 and redis.call('ZCARD', holders) >= limit then
    free_at = tonumber(redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')[2])
  end
  if count > 0 and redis.call('ZCARD', starts) >= count then
    -- the oldest start leaves the window one ms after a period
    local oldest = tonumber(redis.call('ZRANGE', starts, 0, 0, 'WITHSCORES')[2])
    free_at = math.max(free_at, oldest + period + 1)
  end
end
return {k, free_at, now_ms}
