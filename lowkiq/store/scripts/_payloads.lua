-- Payload lists: their order, their merge and their encodings.

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
