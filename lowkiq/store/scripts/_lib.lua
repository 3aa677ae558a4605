-- Prepended to every script, after the locals naming its KEYS (K_READY, K_LEX, ...), which
-- lowkiq.store.keys.lua_prelude() writes from SCRIPT_KEYS: the one place their order is defined.

-- Lua turns numbers into strings with 14 digits; scores need all 17.
local function num(n)
  return string.format('%.17g', n)
end

-- Redis rejects commands with too many arguments for Lua's C stack; write in slices.
local CHUNK = 1000
local function call_chunked(cmd, key, args, step)
  local n = #args
  if n <= CHUNK * step then
    if n > 0 then redis.call(cmd, key, unpack(args)) end
    return
  end
  for i = 1, n, CHUNK * step do
    local last = math.min(i + CHUNK * step - 1, n)
    redis.call(cmd, key, unpack(args, i, last))
  end
end

-- Redis orders members bytewise; Lua's own string comparison follows the locale.
local function bytes_lt(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- Payloads are a flat array {payload, score, payload, score, ...} sorted by score, then bytewise.
local function before(p1, s1, p2, s2)
  if s1 ~= s2 then return s1 < s2 end
  return bytes_lt(p1, p2)
end

local function sort_pairs(best, order)
  table.sort(order, function(x, y) return before(x, best[x], y, best[y]) end)
  local out = {}
  for i, p in ipairs(order) do
    out[2 * i - 1] = p
    out[2 * i] = best[p]
  end
  return out
end

-- Union of a stored (sorted) list and incoming pairs: an equal payload keeps the
-- lower score, whatever the order of arrival. A burst of versions appended to a
-- long list is a linear merge, not a sort of the whole list per version.
local function merge_payloads(a, b)
  local scores, order = {}, {}
  for i = 1, #a, 2 do
    scores[a[i]] = a[i + 1]
    order[#order + 1] = a[i]
  end
  local extra_scores, extra = {}, {}
  local lowered = false
  for i = 1, #b, 2 do
    local p, s = b[i], b[i + 1]
    local cur = scores[p]
    if cur ~= nil then
      if s < cur then
        scores[p] = s
        lowered = true
      end
    else
      local e = extra_scores[p]
      if e == nil then
        extra_scores[p] = s
        extra[#extra + 1] = p
      elseif s < e then
        extra_scores[p] = s
      end
    end
  end
  if lowered then
    -- A stored payload moved: sort everything (rare: an old version sent again).
    for _, p in ipairs(extra) do
      scores[p] = extra_scores[p]
      order[#order + 1] = p
    end
    return sort_pairs(scores, order)
  end
  if #extra == 0 then return a end
  local tail = sort_pairs(extra_scores, extra)
  if #a == 0 then return tail end
  local out, i, j = {}, 1, 1
  while i <= #a or j <= #tail do
    if j > #tail or (i <= #a and before(a[i], a[i + 1], tail[j], tail[j + 1])) then
      out[#out + 1] = a[i]
      out[#out + 1] = a[i + 1]
      i = i + 2
    else
      out[#out + 1] = tail[j]
      out[#out + 1] = tail[j + 1]
      j = j + 2
    end
  end
  return out
end

local function decode(blob)
  return cmsgpack.unpack(blob)
end

local function encode(list)
  return cmsgpack.pack(list)
end

-- A list the push script can append to without decoding it: an array32 header (its count rewritten in
-- place) and the last score as a float64 (read from the end); the earlier scores compact, as cmsgpack
-- writes them.
local function appendable(count, body, last)
  return struct.pack('>BI4', 0xdd, count) .. body .. struct.pack('>Bd', 0xcb, last)
end

local function encode_appendable(list)
  local n = #list
  local last = list[n]
  list[n] = nil
  local packed = cmsgpack.pack(list)
  list[n] = last
  local skip = 1
  if n - 1 >= 65536 then skip = 5 elseif n - 1 >= 16 then skip = 3 end
  return appendable(n, packed:sub(skip + 1), last)
end

-- Fairness (docs/fairness.md). A shard that holds grouped ids indexes them again: K_GREADY (the grouped
-- part of K_READY, same scores), K_GLEX (each group's ids oldest due first), K_GROUPS (group -> max(its
-- oldest perform_in, its last turn); "" is the default group) and K_GTURNS. A score in K_GROUPS may be
-- low (a group's head left), never high: the take corrects a low one when it reaches it.
local LAST_TURN = '\0last'

-- A double as 8 bytes that sort bytewise as the numbers do (0 with the positives: its bytes are all
-- 0, and flipped like a negative's they would sort after every group's range).
local function sortable(x)
  if x == 0 then x = 0 end
  local s = struct.pack('>d', x)
  if x >= 0 then return string.char(s:byte(1) + 128) .. s:sub(2) end
  local out = {}
  for i = 1, 8 do out[i] = string.char(255 - s:byte(i)) end
  return table.concat(out)
end

local function group_prefix(group)
  return struct.pack('>H', #group) .. group
end

-- ``group`` got a job due at ``perform_in``: its score drops to max(perform_in, its turn) if lower.
-- A paused group (K_GPAUSED) stays out of the rotation: its ids wait in their indexes until a resume.
local function group_due(group, perform_in)
  if group ~= '' and redis.call('HEXISTS', K_GPAUSED, group) == 1 then return end
  local turn = redis.call('HGET', K_GTURNS, group)
  if turn then perform_in = math.max(perform_in, tonumber(turn)) end
  redis.call('ZADD', K_GROUPS, 'LT', num(perform_in), group)
end

-- K_GLENGTHS: group -> how many ids it has queued in this shard, the console's depth per group. It moves
-- exactly where an id enters or leaves K_GREADY (group_put, group_drop), so it always equals a count of
-- K_GROUP_OF over the queued ids, and a read of the biggest groups is one ZREVRANGE. A group at 0 leaves it.
local function group_count(group, by)
  if tonumber(redis.call('ZINCRBY', K_GLENGTHS, by, group)) <= 0 then redis.call('ZREM', K_GLENGTHS, group) end
end

-- Grouped ``id`` is queued at ``perform_in`` now (its former place, if any, is forgotten).
local function group_put(id, group, perform_in)
  local prefix = group_prefix(group)
  local old = redis.call('ZSCORE', K_GREADY, id)
  if old then
    redis.call('ZREM', K_GLEX, prefix .. sortable(tonumber(old)) .. id)
  else
    group_count(group, 1)  -- a move inside the queue (debounce, perform now, a merge) counts nothing
  end
  redis.call('ZADD', K_GREADY, num(perform_in), id)
  redis.call('ZADD', K_GLEX, 0, prefix .. sortable(perform_in) .. id)
  group_due(group, perform_in)
end

-- Grouped ``id`` left the queue.
local function group_drop(id, group)
  local old = redis.call('ZSCORE', K_GREADY, id)
  if not old then return end
  redis.call('ZREM', K_GREADY, id)
  redis.call('ZREM', K_GLEX, group_prefix(group) .. sortable(tonumber(old)) .. id)
  group_count(group, -1)
end

-- ``id`` was (re)queued at ``perform_in``: keep the fairness indexes in step. Two reads in a shard
-- that holds no grouped id.
local function group_requeued(id, perform_in)
  local group = redis.call('HGET', K_GROUP_OF, id)
  if group then
    -- a shard's first grouped id: whatever it holds already joins the rotation as the default group
    -- (score 0 is low, as allowed: the take corrects it, or drops it when the group is empty)
    if redis.call('EXISTS', K_GROUPS) == 0 then redis.call('ZADD', K_GROUPS, 0, '') end
    group_put(id, group, perform_in)
  elseif redis.call('EXISTS', K_GROUPS, K_GREADY) > 0 then  -- every group paused: K_GROUPS is gone, not K_GREADY
    group_due('', perform_in)
  end
end

-- Spilled ids. A queued id's payloads are one encoded list in K_PAYLOADS while they are few; past
-- SPILL_AT they move to K_SPILL and K_SPILL_SCORES (two keys of the shard, in its slot and declared: a
-- Cluster moves them with the shard), and the id's field in K_PAYLOADS holds SPILLED and their count.
-- One more version then costs a few O(log n) commands whatever the id holds, not a rewrite of its list.
-- K_SPILL's members, `id NUL sortable(score) payload` scored 0, list an id's payloads in score order,
-- then bytewise, as the encoded lists are; K_SPILL_SCORES maps `id NUL payload` to its score, so that an
-- equal payload keeps the lower score. Ids hold no NUL (jobs.py refuses control characters).
local SPILL_AT = 64
local SPILLED = '\193'  -- 0xc1: a byte msgpack never writes, so no encoded list starts with it

local function spilled_count(field)
  if field and string.byte(field, 1) == 0xc1 then return tonumber(string.sub(field, 2)) end
  return nil
end

local function unsortable(s)
  local b = s:byte(1)
  if b >= 128 then return struct.unpack('>d', string.char(b - 128) .. s:sub(2)) end
  local out = {}
  for i = 1, 8 do out[i] = string.char(255 - s:byte(i)) end
  return struct.unpack('>d', table.concat(out))
end

-- The first ``limit`` (nil: all) payloads of spilled ``id``, {payload, score, ...} in order.
local function spill_read(id, limit)
  local members
  if limit then
    members = redis.call('ZRANGEBYLEX', K_SPILL, '[' .. id .. '\0', '(' .. id .. '\1', 'LIMIT', 0, limit)
  else
    members = redis.call('ZRANGEBYLEX', K_SPILL, '[' .. id .. '\0', '(' .. id .. '\1')
  end
  local out, at = {}, #id + 2
  for i, m in ipairs(members) do
    out[2 * i - 1] = string.sub(m, at + 8)
    out[2 * i] = unsortable(string.sub(m, at, at + 7))
  end
  return out, members
end

-- Pairs {payload, score, ...} into spilled ``id``: an equal payload keeps the lower score. Returns how
-- many payloads it holds now, given how many it held.
local function spill_add(id, pairs, held)
  for i = 1, #pairs, 2 do
    local p, s = pairs[i], pairs[i + 1]
    local field = id .. '\0' .. p
    local old = redis.call('HGET', K_SPILL_SCORES, field)
    if not old then
      held = held + 1
    elseif s < tonumber(old) then
      redis.call('ZREM', K_SPILL, id .. '\0' .. sortable(tonumber(old)) .. p)
    else
      s = nil
    end
    if s then
      redis.call('ZADD', K_SPILL, 0, id .. '\0' .. sortable(s) .. p)
      redis.call('HSET', K_SPILL_SCORES, field, num(s))
    end
  end
  return held
end

-- How many of ``pairs`` spilled ``id`` does not hold yet (pairs hold each payload once).
local function spill_new(id, pairs)
  local n = 0
  for i = 1, #pairs, 2 do
    if redis.call('HEXISTS', K_SPILL_SCORES, id .. '\0' .. pairs[i]) == 0 then n = n + 1 end
  end
  return n
end

-- Removes the first ``limit`` (nil: all) payloads of spilled ``id``; returns how many.
local function spill_remove(id, limit)
  local _, members = spill_read(id, limit)
  local fields, at = {}, #id + 10
  for i, m in ipairs(members) do fields[i] = id .. '\0' .. string.sub(m, at) end
  call_chunked('ZREM', K_SPILL, members, 1)
  call_chunked('HDEL', K_SPILL_SCORES, fields, 1)
  return #members
end

-- ``list`` ({payload, score, ...}, sorted, each payload once) as queued ``id``'s whole payloads, in
-- K_PAYLOADS or spilled when long; what ``id`` held before is replaced.
local function payloads_store(id, list, field)
  if spilled_count(field) then spill_remove(id) end
  local n = #list / 2
  if n <= SPILL_AT then
    redis.call('HSET', K_PAYLOADS, id, encode_appendable(list))
    return
  end
  spill_add(id, list, 0)
  redis.call('HSET', K_PAYLOADS, id, SPILLED .. n)
end

-- Queued ``id``'s payloads, {payload, score, ...}; ``field`` is its K_PAYLOADS field when already read.
local function payloads_of(id, field)
  if field == nil then field = redis.call('HGET', K_PAYLOADS, id) end
  if not field then return nil end
  if spilled_count(field) then return (spill_read(id)) end
  return decode(field)
end

-- Merges pairs into queued ``id`` (``field``: its K_PAYLOADS field, nil for a new id), keeping the newest
-- ``limit`` payloads (0: all of them). Returns how many payloads the cap dropped. A 'reject' cap is the
-- push script's to check, for its whole slice, before anything is written.
local function payloads_merge(id, field, incoming, limit)
  local held = spilled_count(field)
  if held then
    held = spill_add(id, incoming, held)
    local dropped = 0
    if limit > 0 and held > limit then
      dropped = spill_remove(id, held - limit)
      held = held - dropped
    end
    redis.call('HSET', K_PAYLOADS, id, SPILLED .. held)
    return dropped
  end
  local merged = merge_payloads(field and decode(field) or {}, incoming)
  local extra = #merged / 2 - limit
  local dropped = 0
  if limit > 0 and extra > 0 then
    local kept = {}
    for k = 2 * extra + 1, #merged do kept[#kept + 1] = merged[k] end
    merged = kept
    dropped = extra
  end
  payloads_store(id, merged, nil)
  return dropped
end

-- An id keeps its group while any copy of it is queued, in processing or in the morgue (a copy in
-- processing needs it for its way back, a dead one for its requeue). The flags name the places to look
-- at: the one the caller just removed the id from is not among them.
local function group_forget(id, queued, processing, morgue)
  if queued and redis.call('HEXISTS', K_PAYLOADS, id) == 1 then return end
  if processing and redis.call('HEXISTS', K_PROCESSING, id) == 1 then return end
  if morgue and redis.call('HEXISTS', K_M_PAYLOADS, id) == 1 then return end
  redis.call('HDEL', K_GROUP_OF, id)
end

-- Tags (docs/tags.md). K_TAGS_OF: id -> msgpack array of its tags; K_TAGGED: "tag NUL id", all scored 0,
-- so one tag's ids are one ZRANGEBYLEX. Like its group, an id keeps its tags (the union of every version's)
-- while any copy of it is queued, in processing or in the morgue; they leave with its last copy. Shards
-- without a tagged id pay one EXISTS where ids leave.
local function tags_add(id, tags)
  local stored = redis.call('HGET', K_TAGS_OF, id)
  local list, have, index = {}, {}, {}
  if stored then
    list = cmsgpack.unpack(stored)
    for _, tag in ipairs(list) do have[tag] = true end
  end
  for _, tag in ipairs(tags) do
    if not have[tag] then
      have[tag] = true
      list[#list + 1] = tag
      index[#index + 1] = 0
      index[#index + 1] = tag .. '\0' .. id
    end
  end
  if #index > 0 then
    redis.call('HSET', K_TAGS_OF, id, cmsgpack.pack(list))
    call_chunked('ZADD', K_TAGGED, index, 2)
  end
end

-- ``ids`` just left the places not flagged: those with no copy left in the flagged ones lose their tags.
-- ``tagged`` false: the caller knows the shard holds no tags (nil: look).
local function tags_forget(ids, queued, processing, morgue, tagged)
  if #ids == 0 or tagged == false or redis.call('EXISTS', K_TAGS_OF) == 0 then return end
  for _, id in ipairs(ids) do
    local stored = redis.call('HGET', K_TAGS_OF, id)
    if stored and not (queued and redis.call('HEXISTS', K_PAYLOADS, id) == 1)
        and not (processing and redis.call('HEXISTS', K_PROCESSING, id) == 1)
        and not (morgue and redis.call('HEXISTS', K_M_PAYLOADS, id) == 1) then
      local members = {}
      for _, tag in ipairs(cmsgpack.unpack(stored)) do members[#members + 1] = tag .. '\0' .. id end
      call_chunked('ZREM', K_TAGGED, members, 1)
      redis.call('HDEL', K_TAGS_OF, id)
    end
  end
end

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

-- Puts a job into the queue, merging with a queued job of the same id.
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
  redis.call('ZADD', K_READY, num(perform_in), id)
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
  redis.call('ZADD', K_M_UPDATED, num(updated_at), id)
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

-- A stored error (lowkiq.stored_error): where its error text starts and its size, then where its
-- traceback starts and its size (nil and 0 without one).
local TRACEBACK_MARK = '\0lowkiq:traceback\0'
local function error_split(raw)
  if string.sub(raw, 1, #TRACEBACK_MARK) == TRACEBACK_MARK and #raw >= #TRACEBACK_MARK + 4 then
    local size = struct.unpack('>I4', string.sub(raw, #TRACEBACK_MARK + 1, #TRACEBACK_MARK + 4))
    local start = #TRACEBACK_MARK + 5
    if start + size - 1 <= #raw then return start, size, start + size, #raw - start - size + 1 end
  end
  return 1, #raw, nil, 0
end

-- The part of a stored error before its traceback.
local function error_text(raw)
  local es, elen = error_split(raw)
  return string.sub(raw, es, es + elen - 1)
end

-- ``s`` as a content filter compares it: as is when ``match_case``, else its ASCII letters in lower case.
local function case_folded(s, match_case)
  if match_case then return s end
  return string.lower(s)
end

-- Whether a job's content matches: its error's class (the text before the first ':' or line end, as
-- "TimeoutError: ..." is written) equal to ``cls``, its error text containing ``err``, one of its
-- payloads (as stored, serialized) containing ``payload``; '' asks nothing. ``queued``: the queue's job
-- (its payloads through payloads_of: a spilled id keeps them in other keys), else the morgue's.
-- ``match_case``: letters compare as they are, else ignoring case (as the search that counted did).
-- Returns whether it matches and the bytes read, which the scan counts against its budget.
local function content_matches(id, queued, cls, err, payload, match_case)
  cls, err, payload = case_folded(cls, match_case), case_folded(err, match_case), case_folded(payload, match_case)
  local read = 0
  local field = redis.call('HGET', (queued and K_PAYLOADS) or K_M_PAYLOADS, id)
  if not field then return false, 0 end
  if cls ~= '' or err ~= '' then
    local raw = redis.call('HGET', (queued and K_ERRORS) or K_M_ERRORS, id)
    if not raw then return false, 0 end
    read = read + #raw
    local text = case_folded(error_text(raw), match_case)
    if cls ~= '' then
      local head = string.match(text, '^[^:\n]*')
      if string.match(head, '^%s*(.-)%s*$') ~= cls then return false, read end
    end
    if err ~= '' and not string.find(text, err, 1, true) then return false, read end
  end
  if payload == '' then return true, read end
  local list
  if queued then list = payloads_of(id, field) else list = decode(field) end
  for i = 1, #list, 2 do
    local p = list[i]
    if type(p) == 'string' then
      read = read + #p
      if string.find(case_folded(p, match_case), payload, 1, true) then return true, read end
    end
  end
  return false, read
end

-- Whether a job still matches the filter an operator counted: its id (index 'id', bytewise) or its
-- score in the index (perform_in, retry_count, updated_at) within lo..hi, inclusive; '' is unbounded.
-- A job that left the index matches nothing. ``content`` ({area, cls, err, payload}, or nil) asks
-- content_matches too, and ``content[5]`` '1' to match case.
local function matches(id, index, lo, hi, content)
  if content then
    local ok = content_matches(id, content[1] ~= 'morgue', content[2], content[3], content[4], content[5] == '1')
    if not ok then return false end
  end
  if index == 'id' then
    return (lo == '' or not bytes_lt(id, lo)) and (hi == '' or not bytes_lt(hi, id))
  end
  local score
  if index == 'perform_in' then
    score = redis.call('ZSCORE', K_READY, id)
  elseif index == 'updated_at' then
    score = redis.call('ZSCORE', K_M_UPDATED, id)
  elseif index == 'retry_count' then
    score = redis.call('ZSCORE', K_RETRIES, id)
    if not score and redis.call('HEXISTS', K_PAYLOADS, id) == 1 then score = -1 end
  end
  if not score then return false end
  score = tonumber(score)
  return (lo == '' or score >= tonumber(lo)) and (hi == '' or score <= tonumber(hi))
end

-- The ids a script acts on, from ARGV[first] on:
--   'ids', id, ...                 the given ids;
--   'match', index, lo, hi, id, ... the given ids that still match that filter (see matches);
--   'match_content', index, lo, hi, area, cls, err, payload, case, id, ...  the same, and their content
--                                  too (case: '1' to match case, '' to ignore it);
--   'all', limit                   the first ``limit`` ids of ``all_zset``: one chunk of an action on a
--                                  whole area, so that no script's run time grows with the queue.
local function listed_ids(first, all_zset)
  local mode = ARGV[first]
  if mode == 'all' then
    return redis.call('ZRANGE', all_zset, 0, tonumber(ARGV[first + 1]) - 1)
  end
  local ids = {}
  if mode == 'match' or mode == 'match_content' then
    local index, lo, hi = ARGV[first + 1], ARGV[first + 2], ARGV[first + 3]
    local content, from = nil, first + 4
    if mode == 'match_content' then
      content = {ARGV[first + 4], ARGV[first + 5], ARGV[first + 6], ARGV[first + 7], ARGV[first + 8]}
      from = first + 9
    end
    for i = from, #ARGV do
      if matches(ARGV[i], index, lo, hi, content) then ids[#ids + 1] = ARGV[i] end
    end
  else
    for i = first + 1, #ARGV do ids[#ids + 1] = ARGV[i] end
  end
  return ids
end

-- The ids a script acts on (see listed_ids); 'tagged', tag, then any of those: only the ids that carry the tag
-- (docs/tags.md), so that an action counted on a tag filter touches no id that no longer carries it.
local function target_ids(first, all_zset)
  if ARGV[first] ~= 'tagged' then return listed_ids(first, all_zset) end
  local tag, kept = ARGV[first + 1], {}
  for _, id in ipairs(listed_ids(first + 2, all_zset)) do
    if redis.call('ZSCORE', K_TAGGED, tag .. '\0' .. id) then kept[#kept + 1] = id end
  end
  return kept
end

-- The Redis server's clock from one TIME: in ms, and in seconds to the microsecond (a job's default
-- perform_in, so that a job is due as soon as it was pushed). Lease times are Redis server time
-- too: the clocks of the processes never have to agree.
local function server_clock()
  local t = redis.call('TIME')
  local seconds, micros = tonumber(t[1]), tonumber(t[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds + micros / 1000000
end

local function server_ms()
  return (server_clock())
end

-- A script's "now" in unix seconds, and the server's in ms (from the same TIME): ARGV's '' is the
-- Redis server's clock, which every process shares whatever its host's clock says; a number is the
-- caller's own clock (a hand-moved one in tests).
local function clock_now(arg)
  local now_ms, now = server_clock()
  if arg ~= '' then now = tonumber(arg) end
  return now, now_ms
end

-- Each id's history (lowkiq.store.id_history, docs/history.md): a script call that moves ids writes one
-- entry into the shard's K_EVENTS stream, {k = its kind, d = msgpack of what happened}, and the stream
-- keeps its newest ``history_length`` entries (the holder of the lease trims them by age too). One XADD
-- per call, whatever the batch: a take and its ack are one entry. A worker's servers and producers say
-- its length: a script without the worker at hand reads the one the shard's holder wrote into K_LEASE.
local HISTORY_DEFAULT = 10000
-- The lease's fields as refusal() read them (nil when the script did not check a lease).
local LEASE = nil

-- The shard's history length: ``given`` ('' or nil: the one its holder wrote, else the default).
local function history_length(given)
  if given and given ~= '' then return tonumber(given) end
  local stored
  if LEASE then stored = LEASE.history else stored = redis.call('HGET', K_LEASE, 'history') end
  return tonumber(stored or HISTORY_DEFAULT)
end

local function history_add(length, kind, detail)
  if length > 0 then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', length, '*', 'k', kind, 'd', cmsgpack.pack(detail))
  end
end

-- An entry of a step the lease's holder took (after refusal()): {its member id, its fencing token as
-- "cfg_epoch:fence", ``thread`` or else the thread that took the shard's last batch, ...}.
local function history_held(length, kind, thread, ...)
  if length <= 0 then return end
  local owner, token = false, false
  if LEASE then
    owner, token = LEASE.owner or false, (LEASE.cfg_epoch or '0') .. ':' .. (LEASE.fence or '')
    thread = thread or LEASE.thread
  end
  history_add(length, kind, { owner, token, thread or false, ... })
end

-- A stored error as an entry keeps it: whole up to 4 KB; past that its text cut to 2 KB and its
-- traceback's last lines kept within 4 KB (where the exception was raised).
local HISTORY_ERROR_BYTES = 4096
local function history_error(raw)
  if not raw or #raw <= HISTORY_ERROR_BYTES then return raw or false end
  local es, elen, ts, tlen = error_split(raw)
  local text = string.sub(raw, es, es + math.min(elen, 2048) - 1)
  local traceback = ''
  if ts then
    local room = HISTORY_ERROR_BYTES - #text - 64
    traceback = string.sub(raw, math.max(ts, ts + tlen - room), ts + tlen - 1)
  end
  return TRACEBACK_MARK .. struct.pack('>I4', #text) .. text .. traceback
end

-- Fencing: nil when ``grant`` holds this shard's lease now, else the error reply that
-- refuses the caller (FENCED: another grant or a release came since; LEASE_EXPIRED: nobody
-- renewed it in time, so another process may take it over at any moment).
local function refusal(grant, now_ms)
  local lease = redis.call('HMGET', K_LEASE, 'grant', 'state', 'expires_ms', 'owner', 'cfg_epoch', 'fence', 'history',
    'thread')
  if lease[1] ~= grant or lease[2] ~= 'held' then
    return redis.error_reply('FENCED ' .. K_LEASE .. ' is not held by grant ' .. tostring(grant))
  end
  local late = now_ms - tonumber(lease[3])
  if late > 0 then
    return redis.error_reply('LEASE_EXPIRED ' .. K_LEASE .. ' expired ' .. late .. ' ms ago')
  end
  LEASE = { owner = lease[4], cfg_epoch = lease[5], fence = lease[6], history = lease[7], thread = lease[8] }
  return nil
end

-- Every job left in processing goes back to the queue (merge rule "failed job": its own
-- retry_count, perform_in and error win). Returns their ids.
local function restore_processing()
  local records = redis.call('HGETALL', K_PROCESSING)
  local ids = {}
  for i = 1, #records, 2 do
    local retry_count, perform_in, err, payloads = cmsgpack.unpack(records[i + 1])
    queue_put(records[i], payloads, perform_in, retry_count, err, false)
    ids[#ids + 1] = records[i]
  end
  redis.call('DEL', K_PROCESSING)
  return ids
end

-- Acknowledged ids (ARGV[first..]) leave processing and count as processed; a crash count
-- they carried is over, and so are their group and tags unless a copy of the id is left. ``crashes``,
-- ``grouped``: whether the shard holds crash counts, groups (nil: look); ``tagged`` false: it holds no tags.
local function acknowledge(first, crashes, grouped, tagged)
  if #ARGV < first then return {} end
  local n = 0
  if crashes == nil then crashes = redis.call('EXISTS', K_CRASHES) == 1 end
  if grouped == nil then grouped = redis.call('EXISTS', K_GROUP_OF) == 1 end
  for i = first, #ARGV, CHUNK do
    local last = math.min(i + CHUNK - 1, #ARGV)
    n = n + redis.call('HDEL', K_PROCESSING, unpack(ARGV, i, last))
    if crashes then redis.call('HDEL', K_CRASHES, unpack(ARGV, i, last)) end
  end
  if grouped then
    for i = first, #ARGV do group_forget(ARGV[i], true, false, true) end
  end
  if n > 0 then redis.call('HINCRBY', K_COUNTERS, 'processed', n) end
  local ids = {}
  for i = first, #ARGV do ids[#ids + 1] = ARGV[i] end
  tags_forget(ids, true, false, true, tagged)
  return ids
end
