-- Records an operator's action in the audit list, stamped with Redis server time, and keeps the list
-- bounded in entries and in bytes.
-- KEYS are AuditKeys.all(): the audit list.
-- ARGV[1] = the entry (JSON without "at"), ARGV[2] = entries kept, ARGV[3] = bytes of Redis memory the list may
-- hold, ARGV[4] = the largest entry accepted (bytes).
-- Returns the entry's time in ms.
--
-- Bounded work per call: one push, one LTRIM (which removes at most what earlier calls added beyond the
-- cap), MEMORY USAGE (a walk over the list's nodes, at most one per entry kept) and at most MAX_POPS pops.
-- Entries are at most ARGV[4] bytes, so each call adds little and a few pops undo it; the
-- cap on pops only matters once, after the limits were lowered or large entries came from elsewhere.
local MAX_POPS = 1000
if #ARGV[1] > tonumber(ARGV[4]) then
  return redis.error_reply(string.format('audit entry of %d bytes refused: at most %s', #ARGV[1], ARGV[4]))
end
local now_ms = server_ms()
redis.call('LPUSH', KEYS[1], string.format('%d', now_ms) .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
-- The list's memory, not the sum of its entries: it is what Redis pays. A server that refuses
-- MEMORY (a renamed command on a managed service) keeps only the cap on entries.
local usage = redis.pcall('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', '0')
if type(usage) == 'number' then
  local limit = tonumber(ARGV[3])
  local poppable = math.min(redis.call('LLEN', KEYS[1]) - 1, MAX_POPS)  -- never the entry just written
  while usage > limit and poppable > 0 do
    -- Each pop frees at least the entry's bytes: counting only those keeps a margin, never an excess.
    usage = usage - #redis.call('RPOP', KEYS[1])
    poppable = poppable - 1
  end
end
return now_ms
