-- The lease holder puts its own in-flight batch back into the queue, after a write whose
-- reply was lost (merge rule "failed job": retry_count and perform_in unchanged).
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = grant
-- Returns the number of ids restored.
local refused = refusal(ARGV[1], server_ms())
if refused then return refused end
local ids = restore_processing()
if #ids > 0 then history_held(history_length(), 'back', nil, ids) end
return #ids
