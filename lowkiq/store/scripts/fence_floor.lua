-- Raise the shard's stored fencing token to at least a floor, so that its next grant's token
-- (see acquire.lua) exceeds it. ``--change-layout`` passes the highest token any shard of the
-- queue's previous layout gave: an id that moves shard then never sees its token go down, even
-- when the Redis clock stepped back or the Cluster epochs of two primaries differ.
-- Writes only the lease's high-water marks: the grant, its owner and expiry stay as they are.
-- ARGV[1] = cfg_epoch floor, ARGV[2] = fence floor
-- Returns {cfg_epoch, fence} as stored now.
local stored = redis.call('HMGET', K_LEASE, 'cfg_epoch', 'fence')
local cfg_epoch = math.max(tonumber(stored[1]) or 0, tonumber(ARGV[1]))
local fence = math.max(tonumber(stored[2]) or 0, tonumber(ARGV[2]))
redis.call('HSET', K_LEASE, 'cfg_epoch', string.format('%.0f', cfg_epoch), 'fence', string.format('%.0f', fence))
return { cfg_epoch, fence }
