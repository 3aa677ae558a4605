-- A server process stops being a member (after releasing its shards).
-- KEYS are MemberKeys.all(). ARGV[1] = member id, ARGV[2] = a Pub/Sub channel to tell the other
-- members at once (they take its shards over without waiting for their next heartbeat), or ''
local members, infos = KEYS[1], KEYS[2]
redis.call('ZREM', members, ARGV[1])
if ARGV[2] and ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], 'members') end
return redis.call('HDEL', infos, ARGV[1])
