-- Move morgue jobs back to the queue (merge rule "requeued": perform_in = now, retry_count = -1).
-- ARGV[1] = who acts (an operator's name, for each id's history; '' when unknown)
-- ARGV[2] = now ('' : the Redis server's clock), ARGV[3..] = the targets (see target_ids)
-- Returns the number of jobs requeued.
local now = clock_now(ARGV[2])
local ids = target_ids(3, K_M_LEX)
local moved = {}
for _, id in ipairs(ids) do
  local blob = redis.call('HGET', K_M_PAYLOADS, id)
  if blob then
    queue_put(id, decode(blob), now, -1, false, false)
    moved[#moved + 1] = id
  end
end
remove_from_morgue(moved)
if #moved > 0 then history_add(history_length(), 'op', { ARGV[1], 'requeue', moved }) end
return #moved
