-- The hot path: acknowledge the shard's finished batch and take its next one, in one step.
-- Fenced: only the holder of the shard's lease may do it, and doing it renews the lease.
-- ARGV[1] = now ('' : the Redis server's clock), ARGV[2] = how many ids to take (0: only ack), ARGV[3] = grant,
-- ARGV[4] = lease ttl in ms, ARGV[5] = the taking thread's name, ARGV[6..] = ids to acknowledge
-- Returns {next perform_in in the queue or false, id, retry_count, perform_in, error or false, payloads, ...},
-- and one more element, 1, when a job of the batch was in flight when a server died (a suspect:
-- the server performs that batch alone, so that a job that kills it takes no neighbour along).
local limit, grant, ttl = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local now, now_ms = clock_now(ARGV[1])
local refused = refusal(grant, now_ms)
if refused then return refused end

-- Retried ids, stored errors and crash counts are rare: one probe usually rules out all three.
local rare = redis.call('EXISTS', K_RETRIES, K_ERRORS, K_CRASHES) > 0
local any_crashes = rare and redis.call('EXISTS', K_CRASHES) == 1
acknowledge(6, any_crashes)

local out = { false }
local head = nil
if limit > 0 then
  -- One id past the batch: when it is due too, its score is the queue's next head.
  local ready = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit + 1)
  if #ready > 2 * limit then
    head = ready[2 * limit + 2]
    ready[2 * limit + 1], ready[2 * limit + 2] = nil, nil
  end
  if #ready > 0 then
    local any_retries = rare and redis.call('EXISTS', K_RETRIES) == 1
    local any_errors = rare and redis.call('EXISTS', K_ERRORS) == 1
    local suspect = false
    local ids, processing = {}, {}
    for i = 1, #ready, 2 do
      local id, perform_in = ready[i], ready[i + 1]
      local retry_count = -1
      if any_retries then
        retry_count = tonumber(redis.call('ZSCORE', K_RETRIES, id) or -1)
      end
      local err = false
      if any_errors then err = redis.call('HGET', K_ERRORS, id) end
      local payloads = redis.call('HGET', K_PAYLOADS, id)
      if any_crashes and not suspect then suspect = redis.call('HEXISTS', K_CRASHES, id) == 1 end
      ids[#ids + 1] = id
      processing[#processing + 1] = id
      processing[#processing + 1] = cmsgpack.pack(retry_count, tonumber(perform_in), err) .. payloads
      out[#out + 1] = id
      out[#out + 1] = retry_count
      out[#out + 1] = perform_in
      out[#out + 1] = err
      out[#out + 1] = payloads
    end
    call_chunked('HSET', K_PROCESSING, processing, 2)
    call_chunked('ZREM', K_READY, ids, 1)
    call_chunked('ZREM', K_LEX, ids, 1)
    call_chunked('HDEL', K_PAYLOADS, ids, 1)
    if any_retries then
      call_chunked('ZREM', K_RETRIES, ids, 1)
      call_chunked('ZREM', K_RLEX, ids, 1)
    end
    if any_errors then call_chunked('HDEL', K_ERRORS, ids, 1) end
    redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl, 'thread', ARGV[5], 'taken_ms', now_ms)
    if suspect then out[#out + 1] = 1 end
  else
    redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl)
  end
else
  redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl)
end

if head == nil then
  local first = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
  if #first > 0 then head = first[2] end
end
out[1] = head or false
return out
