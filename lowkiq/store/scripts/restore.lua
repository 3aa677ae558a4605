-- The lease holder puts its own in-flight batch back into the queue, after a write whose
-- reply was lost (merge rule "failed job": retry_count and perform_in unchanged).
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = grant
-- Returns the number of ids restored.
local refused = refusal(ARGV[1], server_ms())
if refused then return refused end
local n, ids = restore_processing()
if n > 0 then
  local holder = history_holder()
  history_add(history_length(), 'back', { holder[1], holder[2], ids, holder[3] })
end
return n
