-- Delete every job that failed at least once (retry_count >= 0).
-- Returns the number of jobs deleted.
local ids = redis.call('ZRANGE', K_RETRIES, 0, -1)
remove_from_queue(ids)
return #ids
