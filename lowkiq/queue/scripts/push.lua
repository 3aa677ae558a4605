-- Enqueue new jobs into one shard (merge rule "new job").
-- ARGV[1] = msgpack flat array {id, perform_in, payload, score, ...}
-- Returns the number of distinct ids written.
local jobs = cmsgpack.unpack(ARGV[1])
local pending, order = {}, {}
for i = 1, #jobs, 4 do
  local id = jobs[i]
  local entry = pending[id]
  if not entry then
    local existing = redis.call('HGET', K_PAYLOADS, id)
    entry = { payloads = {}, existing = existing, perform_in = jobs[i + 1] }
    pending[id] = entry
    order[#order + 1] = id
  end
  local ps = entry.payloads
  ps[#ps + 1] = jobs[i + 2]
  ps[#ps + 1] = jobs[i + 3]
end

local payload_args, ready_args, lex_args = {}, {}, {}
for _, id in ipairs(order) do
  local entry = pending[id]
  local payloads = entry.payloads
  if entry.existing then
    payloads = merge_payloads(decode(entry.existing), payloads)
  elseif #payloads > 2 then
    payloads = merge_payloads(payloads, {})
  end
  payload_args[#payload_args + 1] = id
  payload_args[#payload_args + 1] = encode(payloads)
  if not entry.existing then
    ready_args[#ready_args + 1] = num(entry.perform_in)
    ready_args[#ready_args + 1] = id
    lex_args[#lex_args + 1] = 0
    lex_args[#lex_args + 1] = id
  end
end
call_chunked('HSET', K_PAYLOADS, payload_args, 2)
call_chunked('ZADD', K_READY, ready_args, 2)
call_chunked('ZADD', K_LEX, lex_args, 2)
return #order
