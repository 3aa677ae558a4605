-- Payloads of ids that hold many: spilled into their own keys, and read and merged wherever they are.

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
