-- Read-only: one page of one shard's index, after a cursor, for keyset paging in the console.
-- ARGV[1] = index: 'perform_in' | 'retry_count' | 'id' | 'fresh' (ids never failed) | 'morgue_id' | 'morgue_updated_at'
-- ARGV[2] = '1' for descending order
-- ARGV[3], ARGV[4] = min, max: inclusive bounds ('' = unbounded); scores, or ids for id indexes
-- ARGV[5], ARGV[6] = cursor: the score and id of the last row already shown ('' = first page)
-- ARGV[7] = limit
-- Returns {id, score, ...} (score 0 for id indexes, -1 for 'fresh').
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
    out[#out + 1] = chunk[i + 1]
    if #out >= 2 * limit then break end
  end
  if #chunk < 2 * STEP then break end
  position = position + STEP
end
return out
