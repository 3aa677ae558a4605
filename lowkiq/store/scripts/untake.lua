-- Ids the take moved into processing that will not start now go back to their place in the queue,
-- untouched (merge rule "failed job": their own retry_count, perform_in and error), as if never taken:
-- a group with no permit to start (docs/fairness.md), or ids taken ahead that their server stops or hands
-- over before performing them (docs/take-ahead.md). Fenced: only the lease holder may.
-- ARGV[1] = grant, ARGV[2] = why ('group' or 'ahead', told in each id's history), ARGV[3..] = ids.
-- Returns how many went back.
local refused = refusal(ARGV[1], server_ms())
if refused then return refused end
local back = {}
for i = 3, #ARGV do
  local record = redis.call('HGET', K_PROCESSING, ARGV[i])
  if record then
    local retry_count, perform_in, err, payloads = cmsgpack.unpack(record)
    queue_put(ARGV[i], payloads, perform_in, retry_count, err, false)
    redis.call('HDEL', K_PROCESSING, ARGV[i])
    back[#back + 1] = ARGV[i]
  end
end
if #back > 0 then history_held(history_length(), 'untake', nil, back, ARGV[2]) end
return #back
