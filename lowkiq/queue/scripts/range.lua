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

-- Redis orders members bytewise; Lua's own string comparison follows the locale.
local function bytes_le(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

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
if after_score ~= '' then
  if desc then hi = after_score else lo = after_score end
end
local cursor = tonumber(after_score)
local offset = 0
while #out < 2 * limit do
  local chunk
  if desc then
    chunk = redis.call('ZRANGE', key, hi, lo, 'BYSCORE', 'REV', 'LIMIT', offset, STEP, 'WITHSCORES')
  else
    chunk = redis.call('ZRANGE', key, lo, hi, 'BYSCORE', 'LIMIT', offset, STEP, 'WITHSCORES')
  end
  for i = 1, #chunk, 2 do
    local id, score = chunk[i], chunk[i + 1]
    local seen = false
    if cursor and tonumber(score) == cursor then
      if desc then seen = bytes_le(after_id, id) else seen = bytes_le(id, after_id) end
    end
    if not seen then
      out[#out + 1] = id
      out[#out + 1] = score
      if #out >= 2 * limit then break end
    end
  end
  if #chunk < 2 * STEP then break end
  offset = offset + #chunk / 2
end
return out
