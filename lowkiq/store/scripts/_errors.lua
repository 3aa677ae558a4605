-- Stored errors: their text and traceback.

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
