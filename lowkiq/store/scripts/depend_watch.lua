-- A producer's first step for a job with ``after``, in the dependency's shard: record that a dependent
-- waits for the versions of ``id`` queued, in processing or waiting themselves now (docs/dependencies.md).
-- ARGV[1] = the dependency's id, ARGV[2] = the dependency's worker name (as ``after`` names it),
-- ARGV[3], ARGV[4], ARGV[5], ARGV[6] = the dependent's queue, shard, id and wait (the version's unique name)
-- Returns 1 when a watch was recorded, 0 when the id has no version to wait for (nothing written).
local id = ARGV[1]
local queued = redis.call('HEXISTS', K_PAYLOADS, id)
local processing = redis.call('HEXISTS', K_PROCESSING, id)
local parked = redis.call('HGET', K_DEP_PARKED, id)
-- each waiting version of the id comes into the queue on its own (and may be performed on its own)
local waiting = parked and #cmsgpack.unpack(parked) or 0
if queued + processing + waiting == 0 then return 0 end
local _, now = server_clock()
local field = redis.call('HGET', K_DEP_WATCH, id)
local record = field and cmsgpack.unpack(field) or { 0 }
if #record > DEP_MAX then
  return redis.error_reply('AFTER_LIMIT ' .. ARGV[2] .. ' id ' .. id .. ' already has ' .. DEP_MAX ..
    ' dependents waiting (after); nothing of this job was written')
end
-- one acknowledgement per copy: a queued copy is taken (and acknowledged) after the one in processing
record[#record + 1] = { record[1] + queued + processing + waiting, now, ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[2] }
redis.call('HSET', K_DEP_WATCH, id, cmsgpack.pack(record))
return 1
