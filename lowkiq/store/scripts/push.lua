-- Enqueue new jobs into one shard (merge rule "new job").
-- ARGV[1] = msgpack flat array {id, perform_in, payloads, default score, ...} where perform_in is a
--           decimal string ('' = now), payloads the msgpack array {payload, score} of that job, and
--           default score true when its score is a placeholder for now.
-- ARGV[2] = how many jobs of the same call to this shard had a default score before this slice
-- ARGV[3] = the most payloads one id may hold (0: no limit), ARGV[4] = past it: 'drop_oldest' keeps
--           the newest (highest score) payloads and counts the dropped ones; 'reject' writes nothing
--           and answers PAYLOAD_LIMIT
-- ARGV[5], ARGV[6] = a Pub/Sub channel and message, published when this push makes the shard's
--           earliest job earlier (an idle shard gets work): its server wakes instead of polling later
-- ARGV[8] = msgpack flat array {job number in ARGV[1] (from 1), group, ...} of the jobs that carry a
--           group, or '' (docs/fairness.md: an id's group is the one of the job that created it)
-- ARGV[9], ARGV[10] = the worker's debounce and debounce_max in seconds, or '' (SPEC, "Debounce")
-- ARGV[11] = the worker's history_length ('' or none: the one the shard's holder wrote)
-- ARGV[12] = msgpack flat array {job number in ARGV[1] (from 1), {tag, ...}, ...} of the jobs that carry
--           tags, or '' / none (docs/tags.md: an id's tags are the union of its versions')
-- "Now" is the Redis server's clock, so that producers on different hosts agree; jobs with a
-- default score get now, each one unit in the last place later than the one before, in order.
-- Returns {the number of distinct ids written, how many payloads a cap dropped}.
-- Used only by merges, payload caps, the morgue's hold, groups and tags: built by rare() (lowkiq.store.lua), so a
-- push of new ids, the common call, does not build their closures.
--#rare payloads_merge merge_payloads spilled_count spill_new morgue_put group_requeued tags_add decode appendable
local jobs = cmsgpack.unpack(ARGV[1])
local _, now = server_clock()
local _, exponent = math.frexp(now)
local ulp = 2 ^ (exponent - 53)
local next_default = tonumber(ARGV[2] or 0)
local limit, overflow = tonumber(ARGV[3] or 0), ARGV[4]
local dropped = 0
local job_groups = {}
if ARGV[8] and ARGV[8] ~= '' then
  local flat = cmsgpack.unpack(ARGV[8])
  for i = 1, #flat, 2 do job_groups[flat[i]] = flat[i + 1] end
end
local debounce, debounce_max = tonumber(ARGV[9] or ''), tonumber(ARGV[10] or '')
-- id -> the tags this call brings it (in the order given), and the tagged ids in the order they came
local id_tags, tagged_ids = {}, {}
if ARGV[12] and ARGV[12] ~= '' then
  local flat = cmsgpack.unpack(ARGV[12])
  for i = 1, #flat, 2 do
    local id = jobs[4 * flat[i] - 3]
    local list = id_tags[id]
    if not list then
      list = {}
      id_tags[id] = list
      tagged_ids[#tagged_ids + 1] = id
    end
    for _, tag in ipairs(flat[i + 1]) do list[#list + 1] = tag end
  end
end
-- One slot per distinct id (most calls hold each id once): its due time and first pair, and
-- further pairs of the same id in `more`.
local now_text = num(now)
local now_us = us_mode() and us_text(now)  -- a shard written in integer microseconds (_lib.lua): now, formatted once
local index, ids, due, blobs, more, groups = {}, {}, {}, {}, {}, {}
for i = 1, #jobs, 4 do
  local id, perform_in, blob = jobs[i], jobs[i + 1], jobs[i + 2]
  if jobs[i + 3] then
    -- the pair ends with its score, a msgpack float64: 8 big-endian bytes
    blob = string.sub(blob, 1, -9) .. struct.pack('>d', now + next_default * ulp)
    next_default = next_default + 1
  end
  local n = index[id]
  if n then
    local list = more[n]
    if list then list[#list + 1] = blob else more[n] = { blob } end
  else
    n = #ids + 1
    index[id] = n
    ids[n] = id
    if perform_in == '' then due[n] = now_text else due[n] = perform_in end
    if debounce and (tonumber(due[n]) or now) < now + debounce then due[n] = num(now + debounce) end
    blobs[n] = blob
    groups[n] = job_groups[(i + 3) / 4]
  end
end

-- Merging without decoding. A version that sorts after everything its id holds (a higher score
-- than the last) and whose payload is not held already is appended to the encoded list, written
-- appendable (_payloads.lua). Such a list holds at most SPILL_AT payloads: past it the id's payloads are
-- spilled, and one more costs a few O(log n) commands (_spill.lua).

-- The merge's helpers are built by appender() on the first id that is queued already: a push of new ids
-- does not pay for their closures (a fixed cost of every call, like the library's).
local function appender()
  rare()
  -- The position after a msgpack string starting at i, and where its bytes start (nil: not a string).
  local function string_at(s, i)
    local b = s:byte(i)
    if not b then return nil end
    if b >= 0xa0 and b <= 0xbf then return i + 1 + b - 0xa0, i + 1 end
    if b == 0xd9 or b == 0xc4 then return i + 2 + s:byte(i + 1), i + 2 end
    if b == 0xda or b == 0xc5 then return i + 3 + struct.unpack('>I2', s, i + 1), i + 3 end
    if b == 0xdb or b == 0xc6 then return i + 5 + struct.unpack('>I4', s, i + 1), i + 5 end
    return nil
  end

  -- A pair {payload, score} as producers pack it: the payload's encoding, its bytes, the score.
  local function split_pair(pair)
    if pair:byte(1) ~= 0x92 then return nil end
    local stop, first = string_at(pair, 2)
    if not stop or stop > #pair then return nil end
    local score = cmsgpack.unpack(pair:sub(stop))
    if type(score) ~= 'number' then return nil end
    return pair:sub(2, stop - 1), pair:sub(first, stop - 1), score
  end

  local NUMBER_SIZE = { [0xcc] = 2, [0xd0] = 2, [0xcd] = 3, [0xd1] = 3, [0xca] = 5, [0xce] = 5, [0xd2] = 5,
    [0xcb] = 9, [0xcf] = 9, [0xd3] = 9 }

  -- The position after the msgpack number starting at i (nil: not a number).
  local function number_at(s, i)
    local b = s:byte(i)
    if not b then return nil end
    if b < 0x80 or b >= 0xe0 then return i + 1 end
    local size = NUMBER_SIZE[b]
    return size and i + size
  end


  -- The stored list with the new pairs appended, and how many of its oldest payloads were dropped
  -- for the limit; nil when the general merge must decide.
  local function appended(stored, entry)
    local count, body, last
    local b = stored:byte(1)
    if b == 0x92 then  -- one payload, as its producer packed it
      local encoded, _, score = split_pair(stored)
      if not encoded then return nil end
      count, body, last = 2, encoded .. cmsgpack.pack(score), score
    elseif b == 0xdd and stored:byte(-9) == 0xcb then
      count = struct.unpack('>I4', stored, 2)
      last = struct.unpack('>d', stored, #stored - 7)
      body = stored:sub(6, -10) .. cmsgpack.pack(last)
    else
      return nil
    end
    local parts, seen = { body }, {}
    for k = 2, #entry do
      local encoded, bytes, score = split_pair(entry[k])
      -- not (score > last) rather than score <= last: a NaN score goes the long way too
      if not encoded or not (score > last) then return nil end  -- luacheck: ignore 581
      -- equal payloads merge (the lower score wins): any occurrence of these bytes goes the long way
      if string.find(stored, bytes, 1, true) then return nil end
      for _, other in ipairs(seen) do
        if string.find(other, bytes, 1, true) or string.find(bytes, other, 1, true) then return nil end
      end
      seen[#seen + 1] = bytes
      if k > 2 then parts[#parts + 1] = cmsgpack.pack(last) end
      parts[#parts + 1] = encoded
      last = score
      count = count + 2
    end
    -- past SPILL_AT the id's payloads spill: the general merge moves them
    if count / 2 > SPILL_AT then return nil end
    local all, cut = table.concat(parts), 0
    if limit > 0 and count / 2 > limit then
      if overflow ~= 'drop_oldest' then return nil end
      cut = count / 2 - limit
      local at = 1
      for _ = 1, cut do
        at = string_at(all, at)
        at = at and number_at(all, at)
        if not at then return nil end
      end
      all, count = all:sub(at), count - 2 * cut
    end
    return appendable(count, all, last), cut
  end
  return appended
end
local appended = nil

-- The incoming pairs of the n-th id, decoded: {payload, score, ...}.
local function incoming_of(n)
  rare()
  local incoming = {}
  for _, b in ipairs({ blobs[n], unpack(more[n] or {}) }) do
    local pair = decode(b)
    incoming[#incoming + 1] = pair[1]
    incoming[#incoming + 1] = pair[2]
  end
  return incoming
end

-- ARGV[7] = '1' for a worker whose morgue_policy is 'whole_id': an id in the morgue is held there, and
-- its new payloads join its morgue job (in score order) instead of the queue. One HEXISTS per id.
local held = 0
-- history: {id, versions this call brought, 'new' / 'merged' / 'morgue' (joined its dead job), due or false}
local arrived = {}
local function versions(n) return 1 + #(more[n] or {}) end
if ARGV[7] == '1' then
  rare()
  local kept_ids, kept_due, kept_blobs, kept_more, kept_groups = {}, {}, {}, {}, {}
  for n, id in ipairs(ids) do
    if redis.call('HEXISTS', K_M_PAYLOADS, id) == 1 then
      morgue_put(id, incoming_of(n), now, false)
      held = held + 1
      arrived[#arrived + 1] = { id, versions(n), 'morgue', false }
    else
      local k = #kept_ids + 1
      kept_ids[k], kept_due[k], kept_blobs[k], kept_more[k] = id, due[n], blobs[n], more[n]
      kept_groups[k] = groups[n]
    end
  end
  ids, due, blobs, more, groups = kept_ids, kept_due, kept_blobs, kept_more, kept_groups
end

-- 'reject' writes nothing of the slice when any id would pass the cap: every id is checked first.
if limit > 0 and overflow == 'reject' then
  rare()
  for c = 1, #ids, CHUNK do
    local last = math.min(c + CHUNK - 1, #ids)
    local existing = redis.call('HMGET', K_PAYLOADS, unpack(ids, c, last))
    for n = c, last do
      local field, incoming = existing[n - c + 1], incoming_of(n)
      local spilled = spilled_count(field)
      local after
      if spilled then after = spilled + spill_new(ids[n], incoming)
      else after = #merge_payloads(field and decode(field) or {}, incoming) / 2 end
      if after > limit then
        return redis.error_reply('PAYLOAD_LIMIT id ' .. ids[n] .. ' would hold ' .. after ..
          ' payloads; the limit is ' .. limit .. ' (max_payloads_per_id); nothing of this slice was written')
      end
    end
  end
end

-- Fairness indexes (docs/fairness.md): only in shards that hold grouped ids, or get their first now. One
-- EXISTS for both keys: most shards have neither, and a call saved is a fixed cost of every push.
local grouped_shard, fair_shard = false, false
if redis.call('EXISTS', K_GROUP_OF, K_GROUPS) > 0 then
  grouped_shard = redis.call('EXISTS', K_GROUP_OF) == 1
  fair_shard = redis.call('EXISTS', K_GROUPS) == 1
end
local moved = {}  -- ids whose queued perform_in debounce moved: id, perform_in, ...
local earliest = nil
local payload_args, ready_args, lex_args = {}, {}, {}
for c = 1, #ids, CHUNK do
  local last = math.min(c + CHUNK - 1, #ids)
  local existing = redis.call('HMGET', K_PAYLOADS, unpack(ids, c, last))
  for n = c, last do
    local id = ids[n]
    local queued = existing[n - c + 1]
    local blob = blobs[n]
    local entry = nil
    if queued or more[n] then entry = { due[n], blob, unpack(more[n] or {}) } end
    local fast, cut
    if queued then
      appended = appended or appender()
      fast, cut = appended(queued, entry)
    end
    if fast then
      blob = fast
      dropped = dropped + cut
    elseif entry then
      -- Merging: decode everything (a long list is spilled: its merge costs the same whatever it holds)
      rare()
      dropped = dropped + payloads_merge(id, queued, incoming_of(n), limit)
      blob = nil
    end
    if blob then
      payload_args[#payload_args + 1] = id
      payload_args[#payload_args + 1] = blob
    end
    if queued then
      arrived[#arrived + 1] = { id, versions(n), 'merged', false }
    else
      arrived[#arrived + 1] = { id, versions(n), 'new', due[n] }
    end
    if queued and debounce and not redis.call('ZSCORE', K_RETRIES, id) then
      -- a merge into an id that never ran: run once the burst is over, at most debounce_max after its
      -- oldest queued payload came
      local was = secs(redis.call('ZSCORE', K_READY, id))
      local first = tonumber(redis.call('HGET', K_FIRST, id) or now)
      local at = math.max(was, math.min(now + debounce, first + (debounce_max or 10 * debounce)))
      if at > was then
        moved[#moved + 1] = id
        moved[#moved + 1] = at
      end
    end
    if not queued then
      if debounce then redis.call('HSET', K_FIRST, id, now_text) end
      local group = groups[n]
      if group then
        redis.call('HSET', K_GROUP_OF, id, group)
        grouped_shard = true
      elseif grouped_shard then
        redis.call('HDEL', K_GROUP_OF, id)  -- a group left behind by the id's copy in processing
      end
      local at = due[n]
      local when = at == now_text and now or tonumber(at)
      if earliest == nil or when < earliest then earliest = when end
      ready_args[#ready_args + 1] = now_us and (at == now_text and now_us or us_text(when)) or at
      ready_args[#ready_args + 1] = id
      lex_args[#lex_args + 1] = 0
      lex_args[#lex_args + 1] = id
    end
  end
end
-- The shard's earliest job before the writes, for the wake-up below; read only when this push brings new ids
-- (a merge never makes the shard's earliest job earlier), so a push of merges does without it.
local head = nil
if ARGV[6] and earliest then head = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES') end
call_chunked('HSET', K_PAYLOADS, payload_args, 2)
call_chunked('ZADD', K_READY, ready_args, 2)
call_chunked('ZADD', K_LEX, lex_args, 2)
for i = 1, #moved, 2 do redis.call('ZADD', K_READY, time_score(moved[i + 1]), moved[i]) end
if grouped_shard or fair_shard then
  rare()
  for i = 1, #ready_args, 2 do
    group_requeued(ready_args[i + 1], secs(ready_args[i]))
  end
  for i = 1, #moved, 2 do group_requeued(moved[i], moved[i + 1]) end
end
if dropped > 0 then redis.call('HINCRBY', K_COUNTERS, 'dropped', dropped) end
if #tagged_ids > 0 then rare() end
for _, id in ipairs(tagged_ids) do tags_add(id, id_tags[id]) end
if #tagged_ids > 0 then
  for _, entry in ipairs(arrived) do entry[5] = id_tags[entry[1]] end  -- the tags each version brought
end
history_add(history_length(ARGV[11]), 'enq', { arrived, dropped })
if head and (#head == 0 or earliest < secs(head[2])) then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return { #ids + held, dropped }
