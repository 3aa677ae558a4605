-- Move queued jobs to the morgue, all their payloads and their last error: every job that failed at
-- least once (retry_count >= 0), or the given ids whatever their retry count.
-- ARGV[1] = now ('' : the Redis server's clock), ARGV[2] = 'failed' or 'ids', ARGV[3..] = ids
-- Returns the number of jobs moved.
local now = clock_now(ARGV[1])
local ids
if ARGV[2] == 'ids' then
  ids = {}
  for i = 3, #ARGV do
    if redis.call('HEXISTS', K_PAYLOADS, ARGV[i]) == 1 then ids[#ids + 1] = ARGV[i] end
  end
else
  ids = redis.call('ZRANGE', K_RETRIES, 0, -1)
end
for _, id in ipairs(ids) do
  local blob = redis.call('HGET', K_PAYLOADS, id)
  morgue_put(id, decode(blob), now, redis.call('HGET', K_ERRORS, id))
end
remove_from_queue(ids)
return #ids
