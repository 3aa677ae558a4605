-- A server process stops being a member (after releasing its shards).
-- KEYS are MemberKeys.all(). ARGV[1] = member id
local members, infos = KEYS[1], KEYS[2]
redis.call('ZREM', members, ARGV[1])
return redis.call('HDEL', infos, ARGV[1])
