-- Each id's history by age: the shard's event entries written before ARGV[1] (ms of Redis time) go,
-- a listpack node at a time ('~'), at most 1,000 entries per call: a server sends it every minute
-- for each shard it holds (history_max_age), so no call's run time grows with the stream.
-- Returns how many entries were removed.
return redis.call('XTRIM', K_EVENTS, 'MINID', '~', ARGV[1], 'LIMIT', 1000)
