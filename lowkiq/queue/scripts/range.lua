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

if index == 'id' or index == 'fresh' or index == 'morgue_id' then
  local lo = (min ~= '' and '[' .. min) or '-'
  local hi = (max ~= '' and '[' .. max) or '+'
  if after_id ~= '' then
    if desc then hi = '(' .. after_id else lo = '(' .. after_id end
  end
  local offset = 0
  while #out < 2 * limit do
    local chunk
    if desc then
      chunk = redis.call('ZRANGE', key, hi, lo, 'BYLEX', 'REV', 'LIMIT', offset, STEP)
    else
      chunk = redis.call('ZRANGE', key, lo, hi, 'BYLEX', 'LIMIT', offset, STEP)
    end
    for _, id in ipairs(chunk) do
      if index ~= 'fresh' or not redis.call('ZSCORE', K_RETRIES, id) then
        out[#out + 1] = id
        out[#out + 1] = (index == 'fresh' and '-1') or '0'
        if #out >= 2 * limit then break end
      end
    end
    if #chunk < STEP then break end
    offset = offset + #chunk
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
