-- Forgets one worker of the registry, only if its entry is still the one the caller read: the
-- check and the delete are one step, so an entry a server wrote since (it registered the worker
-- again) survives.
-- KEYS are RegistryKeys.all(): the registry hash. ARGV[1] = worker name, ARGV[2] = the entry as read
-- Returns 1 when the entry was deleted, else 0.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
