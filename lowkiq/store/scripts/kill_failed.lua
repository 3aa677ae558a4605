-- Move queued jobs to the morgue, all their payloads and their last error: a chunk of the jobs that
-- failed at least once (retry_count >= 0: 'all' over the retry index), or the given ids whatever
-- their retry count.
-- ARGV[1] = who acts (an operator's name, for each id's history; '' when unknown)
-- ARGV[2] = now ('' : the Redis server's clock), ARGV[3..] = the targets (see target_ids)
-- Returns the number of jobs moved.
local now = clock_now(ARGV[2])
local ids = {}
for _, id in ipairs(target_ids(3, K_RETRIES)) do
  local blob = redis.call('HGET', K_PAYLOADS, id)
  if blob then
    morgue_put(id, payloads_of(id, blob), now, redis.call('HGET', K_ERRORS, id))
    ids[#ids + 1] = id
  end
end
remove_from_queue(ids)
if #ids > 0 then history_add(history_length(), 'op', { ARGV[1], 'kill', ids }) end
return #ids
