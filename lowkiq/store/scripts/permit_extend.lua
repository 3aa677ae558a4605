-- Group limits (docs/fairness.md): a holder renewing its shard's lease moves its permits' end along, sent
-- before (or with) the lease's renewal, so a permit never ends before the lease it stands for.
-- KEYS[1] = the group's permits zset, KEYS[2] = its starts zset (unused)
-- ARGV[1] = ttl in ms, ARGV[2..] = the holder's members
-- Only existing permits move (XX): one that ended (its holder stopped renewing for a whole ttl) is never
-- revived, since another holder may have its place now. Returns how many were extended.
local holders = KEYS[1]
local ttl = tonumber(ARGV[1])
local until_ms = server_ms() + ttl
local n = 0
for i = 2, #ARGV do
  n = n + redis.call('ZADD', holders, 'XX', 'GT', 'CH', until_ms, ARGV[i])
end
if n > 0 and redis.call('PTTL', holders) < ttl then redis.call('PEXPIRE', holders, ttl) end
return n
