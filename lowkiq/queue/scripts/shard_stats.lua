-- Read-only: everything the dashboard needs of one shard, in one call.
-- Returns {length, retries, morgue_length, busy, processed, failed, oldest perform_in or false}
local counters = redis.call('HMGET', K_COUNTERS, 'processed', 'failed')
local head = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
return {
  redis.call('ZCARD', K_READY),
  redis.call('ZCARD', K_RETRIES),
  redis.call('ZCARD', K_M_LEX),
  redis.call('HLEN', K_PROCESSING),
  tonumber(counters[1] or 0),
  tonumber(counters[2] or 0),
  head[2] or false,
}
