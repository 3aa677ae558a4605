-- Extend the lease of a shard whose owner is idle or busy with a long perform.
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = grant, ARGV[2] = ttl in ms
-- Returns the new expiry, ms of Redis server time.
local now_ms = server_ms()
local refused = refusal(ARGV[1], now_ms)
if refused then return refused end
local expires_ms = now_ms + tonumber(ARGV[2])
redis.call('HSET', K_LEASE, 'expires_ms', expires_ms)
return expires_ms
