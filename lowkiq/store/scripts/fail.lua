-- A batch failed: retry each job, or move its oldest payload to the morgue once retries are exhausted.
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = now, ARGV[2] = max_retry_count, ARGV[3] = error, ARGV[4] = grant,
-- ARGV[5..] = id, perform_in of its next try, ...; with ARGV[1] = '' (the Redis server's clock), the
-- seconds from now until its next try instead of a perform_in
-- Returns {{ids not found in processing}, id, morgued payloads (msgpack), ...}: the second part
-- for the jobs that reached the morgue. A job missing from processing is reported, never skipped silently.
local max_retry_count, err = tonumber(ARGV[2]), ARGV[3]
local now, now_ms = clock_now(ARGV[1])
local refused = refusal(ARGV[4], now_ms)
if refused then return refused end
local relative = ARGV[1] == ''
local missing, morgued, failed = {}, { false }, {}
for i = 5, #ARGV, 2 do
  local id, next_perform_in = ARGV[i], tonumber(ARGV[i + 1])
  if relative then next_perform_in = now + next_perform_in end
  local record = redis.call('HGET', K_PROCESSING, id)
  if record then
    local retry_count, _, _, payloads = cmsgpack.unpack(record)
    retry_count = retry_count + 1
    if retry_count >= max_retry_count then
      local oldest = { payloads[1], payloads[2] }
      morgue_put(id, oldest, now, err)
      if #payloads > 2 then
        local rest = {}
        for j = 3, #payloads do rest[#rest + 1] = payloads[j] end
        queue_put(id, rest, now, -1, false, false)
      end
      morgued[#morgued + 1] = id
      morgued[#morgued + 1] = encode(oldest)
    else
      queue_put(id, payloads, next_perform_in, retry_count, err, false)
    end
    redis.call('HDEL', K_PROCESSING, id)
    failed[#failed + 1] = id
  else
    missing[#missing + 1] = id
  end
end
if #failed > 0 then
  redis.call('HINCRBY', K_COUNTERS, 'failed', #failed)
  -- The process lived through the perform: earlier crashes of these jobs no longer count.
  if redis.call('EXISTS', K_CRASHES) == 1 then call_chunked('HDEL', K_CRASHES, failed, 1) end
end
morgued[1] = missing
return morgued
