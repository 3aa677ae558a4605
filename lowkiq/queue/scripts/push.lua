-- Enqueue new jobs into one shard (merge rule "new job").
-- ARGV[1] = msgpack flat array {id, perform_in, payloads, ...} where perform_in is a
--           decimal string and payloads the msgpack array {payload, score} of that job.
-- Returns the number of distinct ids written.
local jobs = cmsgpack.unpack(ARGV[1])
local entries, ids = {}, {}
for i = 1, #jobs, 3 do
  local id = jobs[i]
  local entry = entries[id]
  if entry then
    entry[#entry + 1] = jobs[i + 2]
  else
    entries[id] = { jobs[i + 1], jobs[i + 2] }
    ids[#ids + 1] = id
  end
end

local payload_args, ready_args, lex_args = {}, {}, {}
for c = 1, #ids, CHUNK do
  local last = math.min(c + CHUNK - 1, #ids)
  local existing = redis.call('HMGET', K_PAYLOADS, unpack(ids, c, last))
  for n = c, last do
    local id = ids[n]
    local entry = entries[id]
    local queued = existing[n - c + 1]
    local blob = entry[2]
    if queued or #entry > 2 then
      -- Merging: decode everything; a single new payload is already encoded.
      local incoming = {}
      for k = 2, #entry do
        local pair = decode(entry[k])
        incoming[#incoming + 1] = pair[1]
        incoming[#incoming + 1] = pair[2]
      end
      blob = encode(merge_payloads(queued and decode(queued) or {}, incoming))
    end
    payload_args[#payload_args + 1] = id
    payload_args[#payload_args + 1] = blob
    if not queued then
      ready_args[#ready_args + 1] = entry[1]
      ready_args[#ready_args + 1] = id
      lex_args[#lex_args + 1] = 0
      lex_args[#lex_args + 1] = id
    end
  end
end
call_chunked('HSET', K_PAYLOADS, payload_args, 2)
call_chunked('ZADD', K_READY, ready_args, 2)
call_chunked('ZADD', K_LEX, lex_args, 2)
return #ids
