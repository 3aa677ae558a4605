-- A batch failed, whole or in part: acknowledge the ids that succeeded, and retry each failed job
-- or move it to the morgue once its retries (or its crashes) are exhausted. One step: the ids a
-- PartialFailure spared are never acknowledged without their neighbours' failures being written.
-- Fenced: only the holder of the shard's lease may do it.
-- ARGV[1] = now, ARGV[2] = max_retry_count, ARGV[3] = the batch's error, ARGV[4] = grant,
-- ARGV[5] = morgue policy: 'oldest_payload' (the oldest payload goes to the morgue, the rest back to
--           the queue) or 'whole_id' (every payload, and any payload queued meanwhile for the id),
-- ARGV[6] = crash limit when the failure is a crash of the performing child (each failed id counts
--           one crash, and goes to the morgue at the limit), 0 when it is not,
-- ARGV[7] = n, how many acknowledged ids follow: ARGV[8 .. 7 + n],
-- then id, perform_in of its next try, its own error ('' : the batch's), ...; with ARGV[1] = ''
-- (the Redis server's clock), the seconds from now until its next try instead of a perform_in.
-- Returns {{ids not found in processing}, id, morgued payloads (msgpack), ...}: the second part
-- for the jobs that reached the morgue. A job missing from processing is reported, never skipped silently.
local max_retry_count, batch_err = tonumber(ARGV[2]), ARGV[3]
local now, now_ms = clock_now(ARGV[1])
local refused = refusal(ARGV[4], now_ms)
if refused then return refused end
local relative = ARGV[1] == ''
local whole_id = ARGV[5] == 'whole_id'
local crash_limit = tonumber(ARGV[6])
local acked = tonumber(ARGV[7])
local first = 8 + acked
local missing, morgued, failed, survived = {}, { false }, {}, {}
-- history: for each failed id {id, its retry_count now, 'retry' or 'dead', its next try or how many of its
-- payloads died, its own error or false (false: the batch's)}
local outcomes = {}
local ids = {}
if acked > 0 then
  -- acknowledge() reads ARGV[8..]: the failures after them must not be taken for ids
  for i = 8, first - 1 do ids[#ids + 1] = ARGV[i] end
  local n = 0
  for i = 1, #ids, CHUNK do
    n = n + redis.call('HDEL', K_PROCESSING, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
  end
  if redis.call('EXISTS', K_CRASHES) == 1 then call_chunked('HDEL', K_CRASHES, ids, 1) end
  if n > 0 then redis.call('HINCRBY', K_COUNTERS, 'processed', n) end
  depend_settled(ids, true)
  tags_forget(ids, true, false, true)
end
for i = first, #ARGV, 3 do
  local id, next_perform_in, err = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local own = err ~= ''
  if not own then err = batch_err end
  if relative then next_perform_in = now + next_perform_in end
  local record = redis.call('HGET', K_PROCESSING, id)
  if record then
    local retry_count, _, _, payloads = cmsgpack.unpack(record)
    retry_count = retry_count + 1
    local crashed_out = false
    if crash_limit > 0 then
      crashed_out = redis.call('HINCRBY', K_CRASHES, id, 1) >= crash_limit
      if crashed_out then redis.call('HDEL', K_CRASHES, id) end
    end
    if retry_count >= max_retry_count or crashed_out then
      local dead = payloads
      if whole_id then
        -- Every version in order: what was queued for the id while it performed joins it.
        local queued = payloads_of(id)
        if queued then
          dead = merge_payloads(payloads, queued)
          remove_from_queue({ id })
        end
      else
        dead = { payloads[1], payloads[2] }
        if #payloads > 2 then
          local rest = {}
          for j = 3, #payloads do rest[#rest + 1] = payloads[j] end
          queue_put(id, rest, now, -1, false, false)
        end
      end
      morgue_put(id, dead, now, err)
      morgued[#morgued + 1] = id
      morgued[#morgued + 1] = encode(dead)
      outcomes[#outcomes + 1] = { id, retry_count, 'dead', #dead / 2, own and history_error(err) }
    else
      queue_put(id, payloads, next_perform_in, retry_count, err, false)
      outcomes[#outcomes + 1] = { id, retry_count, 'retry', next_perform_in, own and history_error(err) }
    end
    redis.call('HDEL', K_PROCESSING, id)
    failed[#failed + 1] = id
    if crash_limit == 0 then survived[#survived + 1] = id end
  else
    missing[#missing + 1] = id
  end
end
if #failed > 0 then
  redis.call('HINCRBY', K_COUNTERS, 'failed', #failed)
  -- The process lived through the perform: earlier crashes of these jobs no longer count.
  if #survived > 0 and redis.call('EXISTS', K_CRASHES) == 1 then call_chunked('HDEL', K_CRASHES, survived, 1) end
end
if #outcomes > 0 or #ids > 0 then
  history_held(history_length(), 'fail', nil, history_error(batch_err), ids, outcomes, crash_limit > 0)
end
morgued[1] = missing
return morgued
