-- Moves of ids between the queue and the morgue.

local function remove_from_queue(ids)
  if #ids == 0 then return end
  if redis.call('EXISTS', K_GROUP_OF) == 1 then
    for _, id in ipairs(ids) do
      local group = redis.call('HGET', K_GROUP_OF, id)
      if group then
        group_drop(id, group)
        group_forget(id, false, true, true)
      end
    end
  end
  if redis.call('EXISTS', K_SPILL) == 1 then
    for _, id in ipairs(ids) do
      if spilled_count(redis.call('HGET', K_PAYLOADS, id)) then spill_remove(id) end
    end
  end
  call_chunked('HDEL', K_FIRST, ids, 1)
  call_chunked('ZREM', K_READY, ids, 1)
  call_chunked('ZREM', K_LEX, ids, 1)
  call_chunked('ZREM', K_RLEX, ids, 1)
  call_chunked('ZREM', K_RETRIES, ids, 1)
  call_chunked('HDEL', K_PAYLOADS, ids, 1)
  call_chunked('HDEL', K_ERRORS, ids, 1)
  call_chunked('HDEL', K_CRASHES, ids, 1)
  tags_forget(ids, false, true, true)
end

-- Queued ids are indexed by id twice over: those that never failed in K_LEX, those that
-- failed in K_RLEX (and by retry count in K_RETRIES). So the console pages through the fresh
-- ones, the retried ones or all of them (a merge of two ranges) in O(log n + page).
local function index_retry_count(id, retry_count)
  if retry_count >= 0 then
    redis.call('ZADD', K_RETRIES, retry_count, id)
    redis.call('ZADD', K_RLEX, 0, id)
    redis.call('ZREM', K_LEX, id)
  else
    redis.call('ZREM', K_RETRIES, id)
    redis.call('ZREM', K_RLEX, id)
    redis.call('ZADD', K_LEX, 0, id)
  end
end

-- Puts a job into the queue, merging with a queued job of the same id (perform_in in seconds).
-- keep_schedule: a new job keeps the queued job's perform_in, retry_count and error;
-- otherwise (failed or requeued job) the incoming values win.
local function queue_put(id, payloads, perform_in, retry_count, err, keep_schedule)
  local existing = redis.call('HGET', K_PAYLOADS, id)
  if existing then
    payloads_merge(id, existing, payloads, 0)
  else
    -- they come from Redis (processing, the morgue): already sorted and unique, stored as they are
    payloads_store(id, payloads, nil)
  end
  if existing and keep_schedule then return end
  redis.call('ZADD', K_READY, time_score(perform_in), id)
  group_requeued(id, perform_in)
  if existing or retry_count >= 0 then
    index_retry_count(id, retry_count)
  else
    redis.call('ZADD', K_LEX, 0, id)
  end
  if err then
    redis.call('HSET', K_ERRORS, id, err)
  elseif existing then
    redis.call('HDEL', K_ERRORS, id)
  end
end

-- A payload entering the morgue joins a morgue job of the same id; the newest error wins.
local function morgue_put(id, payloads, updated_at, err)
  local existing = redis.call('HGET', K_M_PAYLOADS, id)
  if existing then
    payloads = merge_payloads(decode(existing), payloads)
  else
    redis.call('ZADD', K_M_LEX, 0, id)
  end
  redis.call('HSET', K_M_PAYLOADS, id, encode(payloads))
  redis.call('ZADD', K_M_UPDATED, time_score(updated_at), id)
  if err then redis.call('HSET', K_M_ERRORS, id, err) end
end

local function remove_from_morgue(ids)
  if #ids == 0 then return end
  if redis.call('EXISTS', K_GROUP_OF) == 1 then
    for _, id in ipairs(ids) do
      if redis.call('HEXISTS', K_GROUP_OF, id) == 1 then group_forget(id, true, true, false) end
    end
  end
  call_chunked('ZREM', K_M_LEX, ids, 1)
  call_chunked('ZREM', K_M_UPDATED, ids, 1)
  call_chunked('HDEL', K_M_PAYLOADS, ids, 1)
  call_chunked('HDEL', K_M_ERRORS, ids, 1)
  tags_forget(ids, true, true, false)
end
