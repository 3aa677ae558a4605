-- On server start: every job left in processing goes back to the queue
-- (merge rule "failed job": its own retry_count and perform_in win).
-- Returns the number of ids restored.
local records = redis.call('HGETALL', K_PROCESSING)
for i = 1, #records, 2 do
  local retry_count, perform_in, err, payloads = cmsgpack.unpack(records[i + 1])
  queue_put(records[i], payloads, perform_in, retry_count, err, false)
end
redis.call('DEL', K_PROCESSING)
return #records / 2
