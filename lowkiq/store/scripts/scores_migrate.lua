-- Layout 3: the shard's time scores become integer microseconds (_lib.lua, US_AT), in place, a chunk per call.
-- The keeper runs it only once every live server reads microseconds (docs/redis.md, "Upgrading"). The first
-- call switches the shard's writers to microseconds; each call then converts up to ARGV[1] seconds scores of
-- the queue (with their group indexes) and of the morgue, the earliest first, and the one that finds none left
-- records layout 3. A producer of an older version may still write seconds later: a call converts them too.
-- Returns {queued scores converted, dead ones converted, 1 when none is left}.
local chunk = tonumber(ARGV[1])
if redis.call('HGET', K_LEASE, 'scores') ~= 'us' then
  redis.call('HSET', K_LEASE, 'scores', 'us')
end

local function converted(key, on_each)
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. US_AT, 'WITHSCORES', 'LIMIT', 0, chunk)
  local args = {}
  for i = 1, #old, 2 do
    local stored = us_text(tonumber(old[i + 1]))
    args[#args + 1] = stored
    args[#args + 1] = old[i]
    if on_each then on_each(old[i], old[i + 1], stored) end
  end
  call_chunked('ZADD', key, args, 2)
  return #old / 2
end

-- A grouped id's place in its group: K_GREADY mirrors K_READY's score, K_GLEX's member is built from it.
local grouped = redis.call('EXISTS', K_GREADY) == 1
local function regroup(id, _, stored)
  local was = grouped and redis.call('ZSCORE', K_GREADY, id)
  if not was then return end
  local prefix = group_prefix(redis.call('HGET', K_GROUP_OF, id) or '')
  redis.call('ZREM', K_GLEX, prefix .. sortable(secs(was)) .. id)
  redis.call('ZADD', K_GREADY, stored, id)
  redis.call('ZADD', K_GLEX, 0, prefix .. sortable(secs(stored)) .. id)
end

local queued = converted(K_READY, regroup)
local dead = converted(K_M_UPDATED, nil)
local done = queued < chunk and dead < chunk
if done and redis.call('HGET', K_LEASE, 'layout') ~= '3' then redis.call('HSET', K_LEASE, 'layout', '3') end
return { queued, dead, done and 1 or 0 }
