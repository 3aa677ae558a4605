-- Make jobs scheduled in the future ready now: every one of the shard, or the given ids.
-- ARGV[1] = now ('' : the Redis server's clock), ARGV[2] = 'all' or 'ids', ARGV[3..] = ids
-- Returns the number of jobs rescheduled.
local now = clock_now(ARGV[1])
local later
if ARGV[2] == 'ids' then
  later = {}
  for i = 3, #ARGV do
    local score = redis.call('ZSCORE', K_READY, ARGV[i])
    if score and tonumber(score) > tonumber(now) then later[#later + 1] = ARGV[i] end
  end
else
  later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now, '+inf')
end
local args = {}
for _, id in ipairs(later) do
  args[#args + 1] = now
  args[#args + 1] = id
end
call_chunked('ZADD', K_READY, args, 2)
return #later
