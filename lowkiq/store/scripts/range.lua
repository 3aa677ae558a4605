-- Read-only: one page of one shard's index, after a cursor, for keyset paging in the console.
-- ARGV[1] = index: 'perform_in' | 'retry_count' | 'id' | 'fresh' (ids never failed) | 'morgue_id' | 'morgue_updated_at'
-- ARGV[2] = '1' for descending order
-- ARGV[3], ARGV[4] = min, max: inclusive bounds ('' = unbounded); scores, or ids for id indexes
-- ARGV[5], ARGV[6] = cursor: the score and id of the last row already shown ('' = first page)
-- ARGV[7] = limit
-- Returns {id, score, ...} (score 0 for id indexes, -1 for 'fresh').
--
-- Or the rows of a page: ARGV[1] = 'jobs' (queued) | 'morgue_jobs', ARGV[2] = bytes of payloads per job at
-- most ('' = all), ARGV[3] = bytes of its error, and of its traceback, at most ('' = all), ARGV[4..] = ids.
-- Each job is cut here, in Redis, so that what a page does not show never crosses the wire.
-- Returns per id false (no such job) or {payloads (the stored msgpack list, or the pairs that fit, the
-- last payload maybe cut), payloads held, bytes of the stored list, whole size of the cut payload (0:
-- none cut), perform_in | updated_at, retry_count (false: never failed), error (false: none), its
-- bytes, traceback (false: none), its bytes}.

-- The unsigned big-endian integer of n bytes at i.
local function be(s, i, n)
  local v = 0
  for k = i, i + n - 1 do v = v * 256 + (s:byte(k) or 0) end
  return v
end

local function be_bytes(v, n)
  local out = {}
  for k = n, 1, -1 do
    out[k] = string.char(v % 256)
    v = math.floor(v / 256)
  end
  return table.concat(out)
end

-- The msgpack element at i: the size of its header and of its data (0 for numbers); nil for a kind
-- the scripts never write in a payload list.
local function element(s, i)
  local b = s:byte(i)
  if b == nil then return nil end
  if b <= 0x7f or b >= 0xe0 or b == 0xc0 or b == 0xc2 or b == 0xc3 then return 1, 0 end
  if b >= 0xa0 and b <= 0xbf then return 1, b - 0xa0 end
  if b == 0xd9 or b == 0xc4 then return 2, be(s, i + 1, 1) end
  if b == 0xda or b == 0xc5 then return 3, be(s, i + 1, 2) end
  if b == 0xdb or b == 0xc6 then return 5, be(s, i + 1, 4) end
  if b == 0xcc or b == 0xd0 then return 2, 0 end
  if b == 0xcd or b == 0xd1 then return 3, 0 end
  if b == 0xce or b == 0xd2 or b == 0xca then return 5, 0 end
  if b == 0xcf or b == 0xd3 or b == 0xcb then return 9, 0 end
  return nil
end

local function string_header(len, bin)
  if bin then
    if len < 256 then return '\196' .. be_bytes(len, 1) end
    if len < 65536 then return '\197' .. be_bytes(len, 2) end
    return '\198' .. be_bytes(len, 4)
  end
  if len < 32 then return string.char(0xa0 + len) end
  if len < 256 then return '\217' .. be_bytes(len, 1) end
  if len < 65536 then return '\218' .. be_bytes(len, 2) end
  return '\219' .. be_bytes(len, 4)
end

local function array_header(n)
  if n < 16 then return string.char(0x90 + n) end
  if n < 65536 then return '\220' .. be_bytes(n, 2) end
  return '\221' .. be_bytes(n, 4)
end

-- A payload list cut to ``cap`` bytes: the pairs that fit whole, then the head of the next payload.
-- Returns the list shown, the payloads held, the whole size of the payload cut (0: none). Walks at
-- most the pairs that fit, and each costs 2 bytes at least: the work is bounded by the cap.
local function clip_payloads(blob, cap)
  local b = blob:byte(1)
  local n, pos
  if b and b >= 0x90 and b <= 0x9f then n, pos = b - 0x90, 2
  elseif b == 0xdc then n, pos = be(blob, 2, 2), 4
  elseif b == 0xdd then n, pos = be(blob, 2, 4), 6
  else return string.sub(blob, 1, cap or #blob), 0, 0 end  -- not a payload list: its head, shown as broken
  local held = math.floor(n / 2)
  if cap == nil or #blob <= cap then return blob, held, 0 end
  local parts, shown, used = {}, 0, 0
  for _ = 1, held do
    local ph, plen = element(blob, pos)
    if ph == nil then break end
    local spos = pos + ph + plen
    local sh = element(blob, spos)
    if sh == nil or spos + sh - 1 > #blob then break end
    local size = ph + plen + sh
    if used + size > cap then
      local keep = cap - used - sh - 5
      if keep > 0 and plen > 0 then
        local kind = blob:byte(pos)
        local head = string_header(keep, kind >= 0xc4 and kind <= 0xc6)
        parts[#parts + 1] = head .. string.sub(blob, pos + ph, pos + ph + keep - 1) .. string.sub(blob, spos, spos + sh - 1)
        return array_header(2 * (shown + 1)) .. table.concat(parts), held, plen
      end
      break
    end
    parts[#parts + 1] = string.sub(blob, pos, spos + sh - 1)
    used = used + size
    shown = shown + 1
    pos = spos + sh
  end
  return array_header(2 * shown) .. table.concat(parts), held, 0
end

-- A stored error: the error and the traceback (error_split), each cut to ``cap`` bytes, and their sizes.
local function error_parts(raw, cap)
  if not raw then return false, 0, false, 0 end
  local es, elen, ts, tlen = error_split(raw)
  local err = string.sub(raw, es, es + ((cap and math.min(elen, cap)) or elen) - 1)
  local tb = false
  if ts and tlen > 0 then tb = string.sub(raw, ts, ts + ((cap and math.min(tlen, cap)) or tlen) - 1) end
  return err, elen, tb, tlen
end

-- The first payloads of spilled ``id`` ({payload, score, ...}), read a few at a time until they pass ``cap``
-- bytes (nil: all of them): a row's cap is a few KB, and what it does not show is never read, however many
-- and however big the id's payloads. Each pair takes 2 bytes at least, so no more than cap / 2 + 1 are read.
local function spill_head(id, cap)
  if not cap then return (spill_read(id)) end
  local out, bytes, count, at = {}, 0, 1, #id + 2
  while bytes <= cap and #out / 2 <= cap / 2 do
    local members = redis.call('ZRANGE', K_SPILL, '[' .. id .. '\0', '(' .. id .. '\1', 'BYLEX', 'LIMIT', #out / 2,
                               count)
    for _, m in ipairs(members) do
      out[#out + 1] = string.sub(m, at + 8)
      out[#out + 1] = unsortable(string.sub(m, at, at + 7))
      bytes = bytes + #m - at - 7
    end
    if #members < count then break end
    count = count * 2
  end
  return out
end

if ARGV[1] == 'jobs' or ARGV[1] == 'morgue_jobs' then
  local queued = ARGV[1] == 'jobs'
  local cap, error_cap = tonumber(ARGV[2]), tonumber(ARGV[3])
  local payloads_key = (queued and K_PAYLOADS) or K_M_PAYLOADS
  local errors_key = (queued and K_ERRORS) or K_M_ERRORS
  local scores_key = (queued and K_READY) or K_M_UPDATED
  local rows = {}
  for i = 4, #ARGV do
    local id = ARGV[i]
    local blob = redis.call('HGET', payloads_key, id)
    local score = redis.call('ZSCORE', scores_key, id)
    local spilled = queued and spilled_count(blob)
    if spilled then
      blob = encode(spill_head(id, cap))
    end
    if blob and score then
      local shown, held, cut = clip_payloads(blob, cap)
      if spilled then held = spilled end
      local retries = (queued and redis.call('ZSCORE', K_RETRIES, id)) or false
      local err, esize, tb, tsize = error_parts(redis.call('HGET', errors_key, id), error_cap)
      if tonumber(score) >= US_AT then score = num(secs(score)) end  -- callers read seconds
      rows[#rows + 1] = {shown, held, #blob, cut, score, retries, err, esize, tb, tsize}
    else
      rows[#rows + 1] = false
    end
  end
  return rows
end

local index, desc, min, max = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4]
local after_score, after_id, limit = ARGV[5], ARGV[6], tonumber(ARGV[7])
local zsets = {
  perform_in = K_READY, retry_count = K_RETRIES, id = K_LEX, fresh = K_LEX,
  morgue_id = K_M_LEX, morgue_updated_at = K_M_UPDATED,
}
local key = zsets[index]
local out = {}
local STEP = math.max(limit, 100)

-- Up to ``limit`` ids of a lex zset inside the bounds, after the cursor.
local function lex_page(zset)
  local lo = (min ~= '' and '[' .. min) or '-'
  local hi = (max ~= '' and '[' .. max) or '+'
  if after_id ~= '' then
    if desc then hi = '(' .. after_id else lo = '(' .. after_id end
  end
  if desc then
    return redis.call('ZRANGE', zset, hi, lo, 'BYLEX', 'REV', 'LIMIT', 0, limit)
  end
  return redis.call('ZRANGE', zset, lo, hi, 'BYLEX', 'LIMIT', 0, limit)
end

if index == 'fresh' or index == 'morgue_id' then
  for _, id in ipairs(lex_page(key)) do
    out[#out + 1] = id
    out[#out + 1] = (index == 'fresh' and '-1') or '0'
  end
  return out
end

if index == 'id' then
  -- Every queued id: the fresh ones and the retried ones, each a page of its own index, merged.
  local a, b = lex_page(K_LEX), lex_page(K_RLEX)
  local i, j = 1, 1
  while #out < 2 * limit and (i <= #a or j <= #b) do
    local take_a
    if i > #a then take_a = false
    elseif j > #b then take_a = true
    elseif desc then take_a = bytes_lt(b[j], a[i])
    else take_a = bytes_lt(a[i], b[j]) end
    if take_a then
      out[#out + 1] = a[i]
      i = i + 1
    else
      out[#out + 1] = b[j]
      j = j + 1
    end
    out[#out + 1] = '0'
  end
  return out
end

-- Time scores: bounds and cursor come in seconds; a shard written in microseconds pages in its own unit (its
-- seconds scores, an older producer's not yet converted, sort first and stay outside a bounded page).
local timed = (index == 'perform_in' or index == 'morgue_updated_at') and us_mode()
if timed then
  if min ~= '' then min = us_text(tonumber(min)) end
  if max ~= '' then max = us_text(tonumber(max)) end
  if after_score ~= '' then after_score = us_text(tonumber(after_score)) end
end
local lo = (min ~= '' and min) or '-inf'
local hi = (max ~= '' and max) or '+inf'
local first
if after_score == '' then
  -- First page: the rank of the first row inside the bounds.
  if desc then
    first = redis.call('ZCOUNT', key, '(' .. hi, '+inf')
  else
    first = redis.call('ZCOUNT', key, '-inf', '(' .. lo)
  end
else
  -- After a cursor (score, id): rows of that score sit at consecutive ranks, ordered
  -- by id, so a binary search over them finds the next row in O(log^2 n), however
  -- many rows share the score (every fresh job after "perform all now", say).
  local cursor = after_score
  local a, b
  if desc then
    a = redis.call('ZCOUNT', key, '(' .. cursor, '+inf')
  else
    a = redis.call('ZCOUNT', key, '-inf', '(' .. cursor)
  end
  b = a + redis.call('ZCOUNT', key, cursor, cursor)
  while a < b do
    local mid = math.floor((a + b) / 2)
    local id
    if desc then
      id = redis.call('ZREVRANGE', key, mid, mid)[1]
    else
      id = redis.call('ZRANGE', key, mid, mid)[1]
    end
    local shown
    if desc then shown = not bytes_lt(id, after_id) else shown = not bytes_lt(after_id, id) end
    if shown then a = mid + 1 else b = mid end
  end
  first = a
end

local bound
if desc then
  bound = (min ~= '' and tonumber(min)) or -math.huge
else
  bound = (max ~= '' and tonumber(max)) or math.huge
end
local position = first
while #out < 2 * limit do
  local chunk
  if desc then
    chunk = redis.call('ZREVRANGE', key, position, position + STEP - 1, 'WITHSCORES')
  else
    chunk = redis.call('ZRANGE', key, position, position + STEP - 1, 'WITHSCORES')
  end
  for i = 1, #chunk, 2 do
    local score = tonumber(chunk[i + 1])
    if (desc and score < bound) or (not desc and score > bound) then return out end
    out[#out + 1] = chunk[i]
    out[#out + 1] = (timed and score >= US_AT and num(secs(score))) or chunk[i + 1]
    if #out >= 2 * limit then break end
  end
  if #chunk < 2 * STEP then break end
  position = position + STEP
end
return out
