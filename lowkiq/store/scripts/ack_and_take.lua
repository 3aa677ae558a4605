-- The hot path: acknowledge the shard's finished batch and take its next one, in one step.
-- Fenced: only the holder of the shard's lease may do it, and doing it renews the lease.
-- ARGV[1] = now ('' : the Redis server's clock), ARGV[2] = how many ids to take (0: only ack; -K: up to K ids
-- taken ahead, docs/take-ahead.md: one while the shard holds crash counts), ARGV[3] = grant,
-- ARGV[4] = lease ttl in ms, ARGV[5] = the taking thread's name, ARGV[6] = the worker's history_length
-- ('' : the one the shard's holder wrote), ARGV[7..] = ids to acknowledge
-- Returns {next perform_in in the queue or false, id, record, ...}, where a job's record is the one it keeps in
-- processing (msgpack retry_count, perform_in, error or false, then its payloads: one string per job, so the
-- reply costs Redis two elements a job), and one more element, 1, when a job of the batch was in flight when a
-- server died (a suspect: the server performs that batch alone, so that a job that kills it takes no neighbour
-- along).
-- In a shard that holds grouped ids the due ids are taken round robin across groups (oldest due first
-- inside a group), and "next perform_in" is the next group's place in the rotation (docs/fairness.md).
-- A worker with group limits sends ARGV[2] as msgpack {how many, {group, ...}}: the groups known to be at their
-- limit now, which the take passes over (and the head skips); its reply then ends with the taken ids' groups
-- ('' for none), after the suspect flag if any.
local limit, grant, ttl = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local blocked, nblocked = nil, 0
if not limit then
  local spec = cmsgpack.unpack(ARGV[2])
  limit, blocked = spec[1], {}
  for _, group in ipairs(spec[2]) do
    blocked[group] = true
    nblocked = nblocked + 1
  end
end
local now, now_ms = clock_now(ARGV[1])
local refused = refusal(grant, now_ms)
if refused then return refused end

-- Retried ids, stored errors, crash counts, groups, debounce records, tags and dependents' watches are rare:
-- one probe usually rules them all out, and a shard without any takes Lowkiq's path unchanged.
local rare = redis.call('EXISTS', K_RETRIES, K_ERRORS, K_CRASHES, K_GROUP_OF, K_GROUPS, K_FIRST, K_TAGS_OF,
  K_DEP_WATCH) > 0
local any_crashes = rare and redis.call('EXISTS', K_CRASHES) == 1
-- Taken ahead, the ids are performed one at a time: a crash of their server is charged to every id left in
-- processing (acquire.lua), so while the shard holds crash counts an id is taken alone.
local ahead = limit < 0
if ahead then limit = any_crashes and 1 or -limit end
-- The id of a take-ahead run its holder said it performs (renew.lua): the run is over once acknowledged or
-- another is taken.
if LEASE.performing and (limit ~= 0 or #ARGV >= 7) then redis.call('HDEL', K_LEASE, 'performing') end
local acked = acknowledge(7, any_crashes, rare and redis.call('EXISTS', K_GROUP_OF) == 1, rare)
if rare then depend_settled(acked, true) end
local history = history_length(ARGV[6])

local fair = false
-- A paused group is out of K_GROUPS, which is gone when every group is paused: its ids are still grouped.
if rare and redis.call('EXISTS', K_GROUPS, K_GREADY) > 0 then
  if redis.call('EXISTS', K_GREADY) == 1 then
    fair = true
  else
    redis.call('DEL', K_GROUPS, K_GTURNS)  -- no grouped id left: Lowkiq's order again
  end
end

-- The rotation across groups, defined only for a shard that holds groups: Redis runs the whole chunk on
-- every call, and each local function is a closure built per call.
local fair_take, fair_head
if fair then
  -- Each take advances the shard's turn by at least this much, so the group just served sorts after
  -- every group already waiting.
  local STEP = 1e-6

  -- The default group's oldest id: the first of K_READY that is not in K_GREADY. K_GREADY is K_READY's
  -- grouped part in the same order, so K_READY[i] == K_GREADY[i] exactly when the first i + 1 ids of
  -- K_READY are all grouped: a galloping search, O(log^2 n) however many grouped ids come first.
  local function default_head()
    local function differ(i)
      local r = redis.call('ZRANGE', K_READY, i, i)[1]
      if not r then return nil end
      return r ~= redis.call('ZRANGE', K_GREADY, i, i)[1]
    end
    local found = differ(0)
    if found == nil then return nil end
    if found then return redis.call('ZRANGE', K_READY, 0, 0)[1] end
    local lo, hi = 0, 1
    while true do
      found = differ(hi)
      if found == nil then
        -- past the end: the last id is the default group's unless every queued id is grouped
        local n = redis.call('ZCARD', K_READY)
        if n == redis.call('ZCARD', K_GREADY) then return nil end
        hi = n - 1
        break
      end
      if found then break end
      lo, hi = hi, 2 * hi + 1
    end
    while hi - lo > 1 do
      local mid = math.floor((lo + hi) / 2)
      if differ(mid) then hi = mid else lo = mid end
    end
    return redis.call('ZRANGE', K_READY, hi, hi)[1]
  end

  -- A group's oldest queued id and its perform_in (as Redis wrote it, in either unit), or nil when it has none.
  local function group_head(group)
    local id
    if group == '' then
      id = default_head()
    else
      local prefix = group_prefix(group)
      local first = redis.call('ZRANGEBYLEX', K_GLEX, '[' .. prefix, '(' .. prefix .. '\255\255', 'LIMIT', 0, 1)[1]
      if first then id = string.sub(first, #prefix + 9) end
    end
    if not id then return nil end
    return id, redis.call('ZSCORE', K_READY, id)
  end

  -- The group at rank ``rank`` of K_GROUPS with its true score, its head id and that id's perform_in,
  -- after correcting low scores on the way (each correction moves a group back, once); nil when none.
  local function group_at(rank, budget)
    while budget > 0 do
      budget = budget - 1
      local top = redis.call('ZRANGE', K_GROUPS, rank, rank, 'WITHSCORES')
      if #top == 0 then return nil end
      local group, score = top[1], tonumber(top[2])
      local id, perform_in = group_head(group)
      if not id then
        redis.call('ZREM', K_GROUPS, group)
        redis.call('HDEL', K_GTURNS, group)
      else
        local at = secs(perform_in)
        local turn = redis.call('HGET', K_GTURNS, group)
        if turn then at = math.max(at, tonumber(turn)) end
        if at <= score then return group, score, id, perform_in end
        redis.call('ZADD', K_GROUPS, num(at), group)
      end
    end
    return nil
  end

  -- Up to ``want`` due ids, one per turn: the group with the lowest score goes, then sorts last.
  -- Returns {id, perform_in, ...} as ZRANGEBYSCORE WITHSCORES would; the ids have left K_READY already.
  fair_take = function(want)
    local ready = {}
    local last = tonumber(redis.call('HGET', K_GTURNS, LAST_TURN) or 0)
    local skip, budget = 0, 4 * want + 16 + nblocked
    while #ready < 2 * want and budget > 0 do
      budget = budget - 1
      local group, _, id, perform_in = group_at(skip, 8)
      if not group then break end
      if blocked and blocked[group] then
        skip = skip + 1  -- at its limit: it keeps its place, the next group goes
      elseif secs(perform_in) > now then
        skip = skip + 1  -- its turn came, its job did not: the next group may be due
      else
        ready[#ready + 1] = id
        ready[#ready + 1] = perform_in
        if group ~= '' then group_drop(id, group) end
        redis.call('ZREM', K_READY, id)
        last = math.max(now, last) + STEP
        redis.call('HSET', K_GTURNS, group, num(last), LAST_TURN, num(last))
        redis.call('ZADD', K_GROUPS, num(last), group)
      end
    end
    return ready
  end

  -- Where the shard stands in its thread's scheduler: the next group's score, or now when it is due
  -- (the turn only orders groups; a shard whose next group waits longest goes first).
  -- Groups at their limit are passed over: the server knows when they may go again.
  fair_head = function()
    for rank = 0, nblocked do
      local group, score, _, perform_in = group_at(rank, 16)
      if not group then return nil end
      if not (blocked and blocked[group]) then
        if secs(perform_in) <= now then score = math.min(score, now) end
        return num(score)
      end
    end
    return nil
  end
end

local out = { false }
local head = nil
local head_known = false  -- head is the queue's next perform_in, or nil because none is left
local taken = nil
if limit > 0 then
  local ready
  local prefix = true  -- the ids taken are the first of K_READY by rank
  if fair then
    ready = fair_take(limit)
  else
    -- The first ids by perform_in and one more: the due ones make the batch, and the first one left is the
    -- queue's next head, due or not, so no second read looks for it. A small batch reads by rank, which costs
    -- Redis less than by score; a bigger one by score, so that a take among jobs not yet due reads no more
    -- than it takes.
    local RANK_READ = 16
    local first
    local us = us_mode()
    local now_us = now * 1000000
    if limit <= RANK_READ then
      first = redis.call('ZRANGE', K_READY, 0, limit, 'WITHSCORES')
      head_known = #first <= 2 * limit  -- the whole queue: nothing is left past it
    else
      first = redis.call('ZRANGEBYSCORE', K_READY, '-inf', us and us_text(now) or now, 'WITHSCORES', 'LIMIT', 0, limit + 1)
    end
    ready = {}
    local waiting = nil  -- a seconds score not due yet, where microsecond ones behind it may be
    for i = 1, #first, 2 do
      if i > 2 * limit then
        head, head_known = first[i + 1], true
        break
      end
      local score = tonumber(first[i + 1])
      -- each score compared in its own unit, so that none is taken early (_lib.lua, US_AT)
      if score >= US_AT then
        if score > now_us then
          head, head_known = first[i + 1], true
          break
        end
      elseif score > now then
        head, head_known = first[i + 1], true
        if us then waiting = score end
        break
      end
      ready[i], ready[i + 1] = first[i], first[i + 1]
    end
    if waiting then
      -- Seconds sort before microseconds: a seconds job an older producer scheduled later must not hold
      -- back the due ones written in microseconds. Rare (seconds are converted by the migration), bounded.
      local want = limit - #ready / 2
      local more = redis.call('ZRANGEBYSCORE', K_READY, US_AT, us_text(now), 'WITHSCORES', 'LIMIT', 0, want)
      for i = 1, #more, 2 do ready[#ready + 1], ready[#ready + 2] = more[i], more[i + 1] end
      if #more > 0 then prefix = false end  -- taken past the seconds job that waits: not a prefix
    end
  end
  if #ready > 0 then
    local any_retries = rare and redis.call('EXISTS', K_RETRIES) == 1
    local any_errors = rare and redis.call('EXISTS', K_ERRORS) == 1
    local suspect = false
    local ids, processing = {}, {}
    -- Every payload in one read (or one per CHUNK ids): a take of several ids pays one call, not one each.
    local wanted = {}
    for i = 1, #ready, 2 do wanted[#wanted + 1] = ready[i] end
    local stored = {}
    for i = 1, #wanted, CHUNK do
      local part = redis.call('HMGET', K_PAYLOADS, unpack(wanted, i, math.min(i + CHUNK - 1, #wanted)))
      for j = 1, #part do stored[#stored + 1] = part[j] end
    end
    for i = 1, #ready, 2 do
      local id, perform_in = ready[i], ready[i + 1]
      local retry_count = -1
      if any_retries then
        retry_count = tonumber(redis.call('ZSCORE', K_RETRIES, id) or -1)
      end
      local err = false
      if any_errors then err = redis.call('HGET', K_ERRORS, id) end
      local payloads = stored[(i + 1) / 2]
      if spilled_count(payloads) then
        payloads = encode((spill_read(id)))
        spill_remove(id)
      end
      if any_crashes and not suspect then suspect = redis.call('HEXISTS', K_CRASHES, id) == 1 end
      local record = cmsgpack.pack(retry_count, secs(perform_in), err) .. payloads
      ids[#ids + 1] = id
      processing[#processing + 1] = id
      processing[#processing + 1] = record
      out[#out + 1] = id
      out[#out + 1] = record
    end
    call_chunked('HSET', K_PROCESSING, processing, 2)
    -- The rotation took its ids out of K_READY one by one; otherwise they are the first #ids by rank (the due
    -- prefix read above), removed by rank without looking each one up.
    -- (A take past a seconds job not yet due, in a shard that holds both units, removes its ids by name.)
    if not fair and prefix then
      redis.call('ZREMRANGEBYRANK', K_READY, 0, #ids - 1)
    elseif not fair then
      call_chunked('ZREM', K_READY, ids, 1)
    end
    call_chunked('ZREM', K_LEX, ids, 1)
    call_chunked('HDEL', K_PAYLOADS, ids, 1)
    if any_retries then
      call_chunked('ZREM', K_RETRIES, ids, 1)
      call_chunked('ZREM', K_RLEX, ids, 1)
    end
    if any_errors then call_chunked('HDEL', K_ERRORS, ids, 1) end
    -- started: a debounced id's window is over
    if rare and redis.call('EXISTS', K_FIRST) == 1 then call_chunked('HDEL', K_FIRST, ids, 1) end
    -- the thread and the history length change rarely: written only when they do
    if LEASE.thread == ARGV[5] and LEASE.history == tostring(history) then
      redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl, 'taken_ms', now_ms)
    else
      redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl, 'thread', ARGV[5], 'taken_ms', now_ms, 'history', history)
    end
    taken = ids
    if suspect then out[#out + 1] = 1 end
    if blocked then
      local groups = {}
      if rare and redis.call('EXISTS', K_GROUP_OF) == 1 then
        for i, id in ipairs(ids) do groups[i] = redis.call('HGET', K_GROUP_OF, id) or '' end
      else
        for i = 1, #ids do groups[i] = '' end
      end
      out[#out + 1] = groups
    end
  else
    redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl)
  end
else
  redis.call('HSET', K_LEASE, 'expires_ms', now_ms + ttl)
end

if fair then
  head = fair_head()
else
  if not head_known then
    local first = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
    if #first > 0 then head = first[2] end
  end
  if head and tonumber(head) < US_AT and us_mode() then
    -- a seconds score first (an older producer's, or one the migration has not reached): the earliest
    -- microseconds one may still be earlier, and the server waits for the head
    local micro = redis.call('ZRANGEBYSCORE', K_READY, US_AT, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #micro > 0 and secs(micro[2]) < tonumber(head) then head = micro[2] end
  end
end
-- the server reads seconds
if head and tonumber(head) >= US_AT then head = num(secs(head)) end
if taken or #acked > 0 then history_held(history, 'run', ARGV[5], acked, taken or {}, ahead and taken ~= nil and #taken > 1) end
out[1] = head or false
return out
