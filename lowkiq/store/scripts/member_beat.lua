-- A server process's heartbeat: it stays a member for ``ttl`` more ms; members whose
-- heartbeat expired are removed. KEYS are MemberKeys.all(): the members zset, the info hash,
-- the paused queues.
-- ARGV[1] = member id, ARGV[2] = ttl in ms, ARGV[3] = its info (JSON), ARGV[4] = a Pub/Sub channel to
-- tell the other members that the membership changed (a member came, or began to leave), or ''
-- Returns {now_ms, {member id, ...}, {info, ...}, {expiry ms, ...}, {paused queue name, ...}}: the live
-- members, by id, and the queues they must not take jobs from.
local members, infos = KEYS[1], KEYS[2]
local now_ms = server_ms()
redis.call('ZADD', members, now_ms + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', infos, ARGV[1], ARGV[3])
local dead = redis.call('ZRANGEBYSCORE', members, '-inf', '(' .. now_ms)
if #dead > 0 then
  redis.call('ZREM', members, unpack(dead))
  redis.call('HDEL', infos, unpack(dead))
end
if ARGV[4] and ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], 'members') end
local live = redis.call('ZRANGE', members, 0, -1, 'WITHSCORES')
local ids, expiries = {}, {}
for i = 1, #live, 2 do
  ids[#ids + 1] = live[i]
  expiries[#expiries + 1] = live[i + 1]
end
local details = {}
if #ids > 0 then details = redis.call('HMGET', infos, unpack(ids)) end
return { now_ms, ids, details, expiries, redis.call('HKEYS', KEYS[3]) }
