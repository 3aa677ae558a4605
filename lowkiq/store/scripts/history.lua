-- Per-minute history of queues: one stream per queue, one entry per minute (its id is the minute in
-- ms of Redis time), holding the queue's totals then. KEYS are HistoryKeys.all(): the hash of the last
-- minute claimed per queue, then each queue's stream, in the order of the queues in ARGV.
-- ARGV[1] = 'claim': ARGV[2..] = queue names. Claims this minute for the queues not sampled yet in it.
--   Returns {minute_ms, {claimed queue name, ...}}.
-- ARGV[1] = 'write': ARGV[2] = minute_ms (a claim's) or 'now' (claim and write at once), ARGV[3] = entries
--   kept per stream, ARGV[4] = fields per queue, then per queue: its name and that many field/value pairs.
--   Returns the number of streams written.
local claimed_hash = KEYS[1]
local now_ms = server_ms()
local minute = now_ms - now_ms % 60000

local function claim(queue)
  local last = tonumber(redis.call('HGET', claimed_hash, queue) or '-1')
  if last >= minute then return false end
  redis.call('HSET', claimed_hash, queue, minute)
  return true
end

if ARGV[1] == 'claim' then
  local claimed = {}
  for i = 2, #ARGV do
    if claim(ARGV[i]) then claimed[#claimed + 1] = ARGV[i] end
  end
  return { minute, claimed }
end

local at = ARGV[2]
local keep, per_queue = ARGV[3], tonumber(ARGV[4])
local written = 0
local i, n = 5, 2
while i <= #ARGV do
  local queue, stream = ARGV[i], KEYS[n]
  local entry_minute = minute
  local ok = true
  if at == 'now' then ok = claim(queue) else entry_minute = tonumber(at) end
  if ok then
    local args = { 'XADD', stream, 'MAXLEN', keep, string.format('%d-0', entry_minute), 'at', now_ms }
    for j = i + 1, i + 2 * per_queue do args[#args + 1] = ARGV[j] end
    -- An entry for this minute already written (a late claimer): keep the first.
    if not redis.pcall(unpack(args))['err'] then written = written + 1 end
  end
  i = i + 1 + 2 * per_queue
  n = n + 1
end
return written
