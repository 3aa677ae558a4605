-- Registers workers for the console, all of them or none: a call that would take the registry past
-- ARGV[1] workers writes nothing. A worker already registered only gets its entry written again, so
-- a restart is never refused, even by a registry that others filled past the bound.
-- KEYS are RegistryKeys.all(): the registry hash. ARGV[1] = the most workers it may hold;
-- ARGV[2], ARGV[3], ... = worker name, entry (JSON), for each worker (at most ARGV[1] of them)
-- Returns {1, workers registered now} when written, {0, workers it would have held} when refused.
local max = tonumber(ARGV[1])
local size = redis.call('HLEN', KEYS[1])
local added = 0
for i = 2, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then added = added + 1 end
end
if added > 0 and size + added > max then
  return {0, size + added}
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return {1, size + added}
