-- Read-only: one bounded step of a content search through one shard, for the console's filters by error
-- class, error text and payload. However big the shard, a step examines at most ARGV[3] ids and stops
-- early once it has read ARGV[4] bytes of errors and payloads: a search of a million jobs is many short
-- steps, never one long script.
-- ARGV[1] = area: 'enqueued' (the fresh ids of K_LEX, then the retried ones of K_RLEX) | 'morgue' (K_M_LEX)
-- ARGV[2] = cursor: '' to start, else what the previous step answered
-- ARGV[3] = ids to examine at most; ARGV[4] = bytes to read at most (the id that crosses it is finished)
-- ARGV[5], ARGV[6], ARGV[7] = error class (equal), error text (contained), payload (contained); '' asks nothing
-- ARGV[8], ARGV[9], ARGV[10] = index, lo, hi: the listing's min..max too (see matches); lo and hi '' for none
-- ARGV[11] = matches wanted at most: the step ends at the last one a page shows, so that the next goes on there
-- Returns {matched ids, examined, next cursor (false: the shard is done)}.
-- A cursor is a section letter ('f' fresh, 'r' retried, 'm' morgue) and the last id examined, so that ids
-- added or removed between steps neither stop nor repeat the search.
local area, cursor = ARGV[1], ARGV[2]
local budget, byte_budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local content = {area, ARGV[5], ARGV[6], ARGV[7]}
local index, lo, hi = ARGV[8], ARGV[9], ARGV[10]
local wanted = tonumber(ARGV[11])
local sections
if area == 'morgue' then sections = {{'m', K_M_LEX}} else sections = {{'f', K_LEX}, {'r', K_RLEX}} end

local section, after = 1, ''
if cursor ~= '' then
  local letter = string.sub(cursor, 1, 1)
  after = string.sub(cursor, 2)
  for i, s in ipairs(sections) do
    if s[1] == letter then section = i end
  end
end

-- An id index bounds the walk itself: ids before lo are skipped in O(log n), and the walk ends past hi.
local by_id = index == 'id'
local matched, examined, read = {}, 0, 0
while section <= #sections do
  local letter, zset = sections[section][1], sections[section][2]
  local start = '-'
  if after ~= '' then start = '(' .. after elseif by_id and lo ~= '' then start = '[' .. lo end
  if by_id and lo ~= '' and after ~= '' and bytes_lt(after, lo) then start = '[' .. lo end
  local stop = (by_id and hi ~= '' and '[' .. hi) or '+'
  local ids = redis.call('ZRANGE', zset, start, stop, 'BYLEX', 'LIMIT', 0, budget - examined)
  for _, id in ipairs(ids) do
    examined = examined + 1
    after = id
    local ok, bytes = content_matches(id, area ~= 'morgue', content[2], content[3], content[4])
    read = read + bytes
    if ok and matches(id, index, lo, hi, nil) then matched[#matched + 1] = id end
    if read >= byte_budget or #matched >= wanted then return {matched, examined, letter .. id} end
  end
  if examined >= budget then return {matched, examined, letter .. after} end
  section, after = section + 1, ''
end
return {matched, examined, false}
