-- Enqueue new jobs into one shard (merge rule "new job").
-- ARGV[1] = msgpack flat array {id, perform_in, payloads, default score, ...} where perform_in is a
--           decimal string ('' = now), payloads the msgpack array {payload, score} of that job, and
--           default score true when its score is a placeholder for now.
-- ARGV[2] = how many jobs of the same call to this shard had a default score before this slice
-- ARGV[3] = the most payloads one id may hold (0: no limit), ARGV[4] = past it: 'drop_oldest' keeps
--           the newest (highest score) payloads and counts the dropped ones; 'reject' writes nothing
--           and answers PAYLOAD_LIMIT
-- "Now" is the Redis server's clock, so that producers on different hosts agree; jobs with a
-- default score get now, each one unit in the last place later than the one before, in order.
-- Returns the number of distinct ids written.
local jobs = cmsgpack.unpack(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local _, exponent = math.frexp(now)
local ulp = 2 ^ (exponent - 53)
local next_default = tonumber(ARGV[2] or 0)
local limit, overflow = tonumber(ARGV[3] or 0), ARGV[4]
local dropped = 0
local entries, ids = {}, {}
for i = 1, #jobs, 4 do
  local id, perform_in, blob = jobs[i], jobs[i + 1], jobs[i + 2]
  if perform_in == '' then perform_in = num(now) end
  if jobs[i + 3] then
    -- the pair ends with its score, a msgpack float64: 8 big-endian bytes
    blob = string.sub(blob, 1, -9) .. struct.pack('>d', now + next_default * ulp)
    next_default = next_default + 1
  end
  local entry = entries[id]
  if entry then
    entry[#entry + 1] = blob
  else
    entries[id] = { perform_in, blob }
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
      local merged = merge_payloads(queued and decode(queued) or {}, incoming)
      local extra = #merged / 2 - limit
      if limit > 0 and extra > 0 then
        if overflow == 'reject' then
          return redis.error_reply('PAYLOAD_LIMIT id ' .. id .. ' would hold ' .. (#merged / 2) ..
            ' payloads; the limit is ' .. limit .. ' (max_payloads_per_id); nothing of this slice was written')
        end
        local kept = {}
        for k = 2 * extra + 1, #merged do kept[#kept + 1] = merged[k] end
        merged = kept
        dropped = dropped + extra
      end
      blob = encode(merged)
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
if dropped > 0 then redis.call('HINCRBY', K_COUNTERS, 'dropped', dropped) end
return #ids
