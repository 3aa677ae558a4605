-- Delete morgue jobs for good.
-- ARGV[1..] = the targets (see target_ids)
-- Returns the number of jobs deleted.
local ids = target_ids(1, K_M_LEX)
local deleted = {}
for _, id in ipairs(ids) do
  if redis.call('HEXISTS', K_M_PAYLOADS, id) == 1 then deleted[#deleted + 1] = id end
end
remove_from_morgue(deleted)
return #deleted
