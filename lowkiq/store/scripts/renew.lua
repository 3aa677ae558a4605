-- Extend the lease of a shard whose owner is idle or busy with a long perform.
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = grant, ARGV[2] = ttl in ms; while a take-ahead run performs, ARGV[3] = the id it performs and
-- ARGV[4] = ms since that perform started: the busy list names it, and counts its time from its start
-- (docs/take-ahead.md).
-- Returns the new expiry, ms of Redis server time.
local now_ms = server_ms()
local refused = refusal(ARGV[1], now_ms)
if refused then return refused end
local expires_ms = now_ms + tonumber(ARGV[2])
if ARGV[3] then
  redis.call('HSET', K_LEASE, 'expires_ms', expires_ms, 'performing', ARGV[3], 'taken_ms', now_ms - tonumber(ARGV[4]))
else
  redis.call('HSET', K_LEASE, 'expires_ms', expires_ms)
end
return expires_ms
