-- What operators' filters and bulk actions match, and the ids they act on.

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
  if index == 'retry_count' then score = tonumber(score) else score = secs(score) end
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
