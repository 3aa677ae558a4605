-- Delete queued jobs.
-- ARGV[1] = 'ids' or 'all', ARGV[2..] = ids
-- Returns the number of jobs deleted.
local ids = target_ids(ARGV[1], 2, K_LEX)
if ARGV[1] == 'all' then
  for _, id in ipairs(redis.call('ZRANGE', K_RLEX, 0, -1)) do ids[#ids + 1] = id end
end
local deleted = {}
for _, id in ipairs(ids) do
  if redis.call('HEXISTS', K_PAYLOADS, id) == 1 then deleted[#deleted + 1] = id end
end
remove_from_queue(deleted)
return #deleted
