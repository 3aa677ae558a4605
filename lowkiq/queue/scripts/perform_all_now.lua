-- Make every job scheduled in the future ready now.
-- ARGV[1] = now
-- Returns the number of jobs rescheduled.
local now = ARGV[1]
local later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now, '+inf')
local args = {}
for _, id in ipairs(later) do
  args[#args + 1] = now
  args[#args + 1] = id
end
call_chunked('ZADD', K_READY, args, 2)
return #later
