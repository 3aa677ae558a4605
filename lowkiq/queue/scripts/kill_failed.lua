-- Move every job that failed at least once (retry_count >= 0) to the morgue, all its payloads.
-- ARGV[1] = now
-- Returns the number of jobs moved.
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGE', K_RETRIES, 0, -1)
for _, id in ipairs(ids) do
  local blob = redis.call('HGET', K_PAYLOADS, id)
  morgue_put(id, decode(blob), now, redis.call('HGET', K_ERRORS, id))
end
remove_from_queue(ids)
return #ids
