-- Records an operator's action in the capped audit list, stamped with Redis server time.
-- KEYS are AuditKeys.all(): the audit list. ARGV[1] = the entry (JSON without "at"), ARGV[2] = entries kept
-- Returns the entry's time in ms.
local now_ms = server_ms()
redis.call('LPUSH', KEYS[1], string.format('%d', now_ms) .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return now_ms
