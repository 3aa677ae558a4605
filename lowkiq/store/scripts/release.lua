-- Hand the shard over: acknowledge the owner's last batch, put back whatever else is still in
-- processing (a lost acknowledgement), and release the lease so another member takes it at once.
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = grant, ARGV[2..] = ids to acknowledge
-- Returns the number of ids put back into the queue.
local refused = refusal(ARGV[1], server_ms())
if refused then return refused end
local acked = acknowledge(2)
depend_settled(acked, true)
local ids = restore_processing()
if #acked > 0 or #ids > 0 then history_held(history_length(), 'rel', nil, acked, ids) end
redis.call('HSET', K_LEASE, 'state', 'released', 'expires_ms', 0)
redis.call('HDEL', K_LEASE, 'thread', 'taken_ms', 'performing')
return #ids
