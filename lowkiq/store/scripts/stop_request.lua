-- An operator asks the server performing id ARGV[1] to stop its perform (process isolation). The request
-- is written in the shard's lease hash, bound to the batch in processing now (the lease's grant and the
-- taken_ms of its take), so that it can never stop a later batch; the server performing it reads it while
-- it waits on its child (lowkiq.store.stops).
-- ARGV[1] = the id, ARGV[2] = who asks (named in the batch's error).
-- Returns 1 when the request is written; 0 when the id is not in processing; 2 when it is, but no live
-- server holds the shard's lease (its batch goes back to the queue when another server takes it over).
if redis.call('HEXISTS', K_PROCESSING, ARGV[1]) == 0 then return 0 end
local lease = redis.call('HMGET', K_LEASE, 'state', 'grant', 'taken_ms', 'expires_ms')
local now_ms = server_ms()
if lease[1] ~= 'held' or not lease[3] or tonumber(lease[4] or 0) < now_ms then return 2 end
redis.call('HSET', K_LEASE, 'stop_id', ARGV[1], 'stop_grant', lease[2], 'stop_taken_ms', lease[3],
           'stop_by', ARGV[2], 'stop_ms', string.format('%d', now_ms))
return 1
