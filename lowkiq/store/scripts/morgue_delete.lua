-- Delete morgue jobs for good.
-- ARGV[1] = who acts (an operator's name, for each id's history; '' when unknown)
-- ARGV[2..] = the targets (see target_ids)
-- Returns the number of jobs deleted.
local ids = target_ids(2, K_M_LEX)
local deleted = {}
for _, id in ipairs(ids) do
  if redis.call('HEXISTS', K_M_PAYLOADS, id) == 1 then deleted[#deleted + 1] = id end
end
remove_from_morgue(deleted)
depend_settled(deleted, false)
if #deleted > 0 then history_add(history_length(), 'op', { ARGV[1], 'morgue_delete', deleted }) end
return #deleted
