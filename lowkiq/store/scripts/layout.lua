-- Claims the number of shards of each queue, or names the first queue laid out otherwise.
-- Producers or servers that disagree would hash one id into two shards, where two
-- threads could run it at once and its versions run out of order.
-- KEYS are LayoutKeys.all(): the layouts hash.
-- ARGV = queue name, shards_count, queue name, shards_count, ...
-- Returns {} when every queue agrees (the ones not yet known are recorded), else
-- {queue name, its recorded shards_count}, and then nothing is written.
local layouts = KEYS[1]
for i = 1, #ARGV, 2 do
  local recorded = redis.call('HGET', layouts, ARGV[i])
  if recorded and recorded ~= ARGV[i + 1] then
    return {ARGV[i], recorded}
  end
end
for i = 1, #ARGV, 2 do
  redis.call('HSET', layouts, ARGV[i], ARGV[i + 1])
end
return {}
