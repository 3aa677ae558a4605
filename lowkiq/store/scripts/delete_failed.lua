-- Delete jobs that failed at least once (retry_count >= 0), a chunk at a time.
-- ARGV[1] = who acts (an operator's name, for each id's history; '' when unknown)
-- ARGV[2] = 'all', ARGV[3] = how many at most (see target_ids)
-- Returns the number of jobs deleted.
local ids = target_ids(2, K_RETRIES)
remove_from_queue(ids)
depend_settled(ids, false)
if #ids > 0 then history_add(history_length(), 'op', { ARGV[1], 'delete_failed', ids }) end
return #ids
