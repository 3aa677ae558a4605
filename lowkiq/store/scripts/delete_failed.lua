-- Delete jobs that failed at least once (retry_count >= 0), a chunk at a time.
-- ARGV[1] = 'all', ARGV[2] = how many at most (see target_ids)
-- Returns the number of jobs deleted.
local ids = target_ids(1, K_RETRIES)
remove_from_queue(ids)
return #ids
