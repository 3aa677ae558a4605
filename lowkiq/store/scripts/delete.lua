-- Delete queued jobs (not those in processing).
-- ARGV[1] = who acts (an operator's name, for each id's history; '' when unknown)
-- ARGV[2..] = the targets (see target_ids); a chunk of 'all' takes fresh ids first, then retried ones.
-- Returns the number of jobs deleted.
local ids = target_ids(2, K_LEX)
if ARGV[2] == 'all' and #ids < tonumber(ARGV[3]) then
  for _, id in ipairs(redis.call('ZRANGE', K_RLEX, 0, tonumber(ARGV[3]) - #ids - 1)) do ids[#ids + 1] = id end
end
local deleted = {}
for _, id in ipairs(ids) do
  if redis.call('HEXISTS', K_PAYLOADS, id) == 1 then deleted[#deleted + 1] = id end
end
remove_from_queue(deleted)
depend_settled(deleted, false)
if #deleted > 0 then history_add(history_length(), 'op', { ARGV[1], 'delete', deleted }) end
return #deleted
