-- Read-only: one bounded step of a content search through one shard, for the console's filters by error
-- class, error text and payload. However big the shard and its jobs, a step examines at most ARGV[3] ids
-- and stops once it has done ARGV[4] units of work: each byte read from Redis is a unit, each byte compared
-- with a needle ARGV[12] (error) or ARGV[13] (payload) units more, since a comparison can cost more than the
-- read (search.py, compare_weight). A search of a million jobs, or of one id holding 50 MB of payloads, is
-- many short steps, never one long script.
-- ARGV[1] = area: 'enqueued' (the fresh ids of K_LEX, then the retried ones of K_RLEX) | 'morgue' (K_M_LEX)
-- ARGV[2] = cursor: '' to start, else what the previous step answered
-- ARGV[3] = ids to examine at most; ARGV[4] = work to do at most
-- ARGV[5], ARGV[6], ARGV[7] = error class (equal), error text (contained), payload (contained); '' asks nothing
-- ARGV[8], ARGV[9], ARGV[10] = index, lo, hi: the listing's min..max too (see matches); lo and hi '' for none
-- ARGV[11] = matches wanted at most: the step ends at the last one a page shows, so that the next goes on there
-- ARGV[12], ARGV[13] = units of work per byte compared with the error text, with a payload
-- ARGV[14] = '1' to match case; '' compares letters ignoring case (ASCII: Redis's Lua folds bytes)
-- Returns {matched ids, examined, next cursor (false: the shard is done), work done}.
-- A cursor is a section letter ('f' fresh, 'r' retried, 'm' morgue) and the last id examined, so that ids
-- added or removed between steps neither stop nor repeat the search. A step that ends inside a spilled id
-- answers the letter in capitals, where the id's payloads go on (the payload's position from 0, the byte in
-- it from 0) and the id: 'F12,0,order-7'. The next step goes on there: the id's error matched already, and
-- payloads added or removed before that position since are not looked at again.
--
-- What a step cannot split is bounded before it is read: a value's size is known first (HSTRLEN), and one
-- that would pass the budget is left to the next step, where it is read alone. An error and an id's list
-- of up to SPILL_AT payloads are one value each; a spilled id's payloads are read a few at a time, and one
-- payload too big for what is left of the budget is compared a window at a time, step after step.
local area, cursor = ARGV[1], ARGV[2]
local id_budget, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local cls, err, needle = ARGV[5], ARGV[6], ARGV[7]
local index, lo, hi = ARGV[8], ARGV[9], ARGV[10]
local wanted = tonumber(ARGV[11])
local err_weight, payload_weight = tonumber(ARGV[12]), tonumber(ARGV[13])
local match_case = ARGV[14] == '1'
cls, err, needle = case_folded(cls, match_case), case_folded(err, match_case), case_folded(needle, match_case)
local queued = area ~= 'morgue'
local payloads_key, errors_key = K_M_PAYLOADS, K_M_ERRORS
if queued then payloads_key, errors_key = K_PAYLOADS, K_ERRORS end
local sections
if queued then sections = {{'f', K_LEX}, {'r', K_RLEX}} else sections = {{'m', K_M_LEX}} end
-- A payloads field this short may be a spilled id's mark (SPILLED and a count); a longer one is a list.
local MARK_BYTES = 24
-- Spilled payloads read per command at most.
local SPILL_PAGE = 16

-- Work done so far, and whether the step has moved the search on (compared a payload or finished an id):
-- until it has, it reads what it must, so that every step goes forward whatever the budget.
local work, moved = 0, false
local function spent() return moved and work >= budget end
local function fits(cost) return not moved or work + cost <= budget end

-- Whether ``needle`` is in ``s`` (a payload of ``size`` bytes at its end) from byte ``from`` on. Compares a
-- budget's worth of bytes at most, or an eighth of the payload when that is more (so that a payload is read
-- again eight times at most); when that is not all of ``s``, answers the byte the next window starts at, a
-- match across the window's end being the next one's (windows overlap by the needle's length less one).
local function contains(s, from, weight, size)
  moved = true
  local rest = #s - from + 1
  if rest < #needle then return false end
  local window = math.max(math.floor(budget / weight), math.floor(size / 8))
  if rest <= window then
    work = work + rest * weight
    if not match_case then return string.find(string.lower(string.sub(s, from)), needle, 1, true) ~= nil end
    return string.find(s, needle, from, true) ~= nil
  end
  work = work + window * weight
  local part = case_folded(string.sub(s, from, from + window + #needle - 2), match_case)
  if string.find(part, needle, 1, true) then return true end
  return from + window
end

-- The error part of the filter: true, false, or nil when the error does not fit in what is left.
local function error_matches(id)
  if cls == '' and err == '' then return true end
  local size = redis.call('HSTRLEN', errors_key, id)
  if size == 0 then return false end
  local cost = size
  if err ~= '' then cost = cost + size * err_weight end
  if not fits(cost) then return nil end
  work = work + cost
  local text = case_folded(error_text(redis.call('HGET', errors_key, id)), match_case)
  if cls ~= '' then
    local head = string.match(text, '^[^:\n]*')
    if string.match(head, '^%s*(.-)%s*$') ~= cls then return false end
  end
  return err == '' or string.find(text, err, 1, true) ~= nil
end

-- A spilled id's payloads from position ``at`` (byte ``byte`` of it) on: true, false, or where to go on.
local function spill_contains(id, at, byte)
  local first, last, skip = '[' .. id .. '\0', '(' .. id .. '\1', #id + 10
  -- Bytes of the biggest payload read so far: one is read first, then as many as what is left of the
  -- budget would take of payloads that big.
  local each = 0
  while true do
    if spent() then return {at, byte} end
    local count = 1
    if each > 0 then
      count = math.max(1, math.min(SPILL_PAGE, math.floor((budget - work) / (each * (1 + payload_weight)))))
    end
    -- A payload is counted when it is reached: the rest of a page cut short is read again by the next step.
    local members = redis.call('ZRANGE', K_SPILL, first, last, 'BYLEX', 'LIMIT', at, count)
    for _, m in ipairs(members) do
      if spent() then return {at, byte} end
      each = math.max(each, #m)
      work = work + #m
      local found = contains(m, skip + byte, payload_weight, #m - skip + 1)
      if found == true then return true end
      if found then return {at, found - skip} end
      at, byte = at + 1, 0
    end
    if #members < count then return false end
  end
end

-- The payload part of the filter for ``id`` (``at``, ``byte``: where a spilled id goes on): true, false,
-- nil when its list does not fit in what is left, or {at, byte} where the next step goes on.
local function payloads_match(id, at, byte)
  if needle == '' then return true end
  local size = redis.call('HSTRLEN', payloads_key, id)
  if size == 0 then return false end
  local field
  if size <= MARK_BYTES then field = redis.call('HGET', payloads_key, id) end
  if queued and spilled_count(field) then return spill_contains(id, at, byte) end
  -- One value: read (then decoded, a second copy) and compared whole, in this step or alone in the next.
  local cost = size * (2 + payload_weight)
  if not fits(cost) then return nil end
  work = work + cost
  moved = true
  local list = decode(field or redis.call('HGET', payloads_key, id))
  for i = 1, #list, 2 do
    local p = list[i]
    if type(p) == 'string' and string.find(case_folded(p, match_case), needle, 1, true) then return true end
  end
  return false
end

local section, after, resume = 1, '', nil
if cursor ~= '' then
  local letter = string.sub(cursor, 1, 1)
  after = string.sub(cursor, 2)
  local at, byte, id = string.match(after, '^(%d+),(%d+),(.*)$')
  if string.lower(letter) ~= letter and id then
    letter, after, resume = string.lower(letter), '', {id, tonumber(at), tonumber(byte)}
  end
  for i, s in ipairs(sections) do
    if s[1] == letter then section = i end
  end
end

-- An id index bounds the walk itself: ids before lo are skipped in O(log n), and the walk ends past hi.
local by_id = index == 'id'
local matched, examined = {}, 0
while section <= #sections do
  local letter, zset = sections[section][1], sections[section][2]
  local start = '-'
  if resume then start = '[' .. resume[1]
  elseif after ~= '' then start = '(' .. after
  elseif by_id and lo ~= '' then start = '[' .. lo end
  if by_id and lo ~= '' and after ~= '' and bytes_lt(after, lo) then start = '[' .. lo end
  local stop = (by_id and hi ~= '' and '[' .. hi) or '+'
  local ids = redis.call('ZRANGE', zset, start, stop, 'BYLEX', 'LIMIT', 0, id_budget - examined)
  for _, id in ipairs(ids) do
    local ok
    if resume and id == resume[1] then
      ok = payloads_match(id, resume[2], resume[3])
    elseif redis.call('HEXISTS', payloads_key, id) == 0 or not matches(id, index, lo, hi, nil) then
      ok = false
    else
      ok = error_matches(id)
      if ok then ok = payloads_match(id, 0, 0) end
    end
    resume = nil
    if ok == nil then return {matched, examined, letter .. after, work} end
    if type(ok) == 'table' then
      return {matched, examined, string.upper(letter) .. ok[1] .. ',' .. ok[2] .. ',' .. id, work}
    end
    examined, after, moved = examined + 1, id, true
    if ok then matched[#matched + 1] = id end
    if work >= budget or #matched >= wanted then return {matched, examined, letter .. id, work} end
  end
  if examined >= id_budget then return {matched, examined, letter .. after, work} end
  section, after, resume = section + 1, '', nil
end
return {matched, examined, false, work}
