-- Enqueue a recurring schedule's due ticks, each exactly once: the schedule's high-water mark (the
-- latest tick dealt with) lives in the slot of the shard its jobs land in and moves in this very
-- script, so however many servers send the same tick, one push happens.
-- KEYS are ScheduleShardKeys.all(): the shard's keys in SCRIPT_KEYS' order, then the schedules hash.
-- ARGV[1 .. #ARGV-1] = the push script's ARGV, ARGV[1] holding one job per candidate tick (perform_in
--           = the tick, a decimal string), oldest first; empty: only read the schedule's state.
-- ARGV[#ARGV] = msgpack {schedule name, missed_until, catch_up}: candidate ticks at or before
--           missed_until (unix seconds, Redis time: when the caller started watching) came due while no
--           server watched; catch_up ("last", "all", "none") says which of those are enqueued.
-- Returns {outcome, mark, last enqueued tick, tick enqueued, ...}, times as decimal strings ('' unknown):
-- outcome "paused" (nothing written), "state" (read only), "skipped" (mark moved, nothing pushed),
-- "enqueued", or "early" (every tick sent is still ahead of Redis's clock: nothing written; the fourth
-- element is Redis's time); an error reply of push (e.g. PAYLOAD_LIMIT) is returned as is, with nothing
-- written. A tick ahead of Redis's clock is never enqueued, whatever the caller believed the time was: merged
-- into a job already due, its payload would be performed before its moment.
local function push_body()
--#include push
end

local H = KEYS[#KEYS]
local meta = cmsgpack.unpack(ARGV[#ARGV])
ARGV[#ARGV] = nil
local name, missed_until, catch_up = meta[1], tonumber(meta[2]), meta[3]
local F_TICK, F_LAST, F_PAUSED, F_RESUMED = 'tick:' .. name, 'last:' .. name, 'paused:' .. name, 'resumed:' .. name
local state = redis.call('HMGET', H, F_TICK, F_LAST, F_PAUSED, F_RESUMED)
local mark, last = state[1] or '', state[2] or ''
if state[3] then return { 'paused', mark, last } end
if ARGV[1] == nil or ARGV[1] == '' then return { 'state', mark, last } end

local marked = tonumber(state[1])
local resumed = tonumber(state[4])
-- Ticks due while the schedule was paused count as missed too.
if resumed and resumed > missed_until then missed_until = resumed end
local jobs = cmsgpack.unpack(ARGV[1])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local missed, on_time = {}, {}
local top = marked
local early = false
for i = 1, #jobs, 4 do
  local tick = tonumber(jobs[i + 1])
  if tick > now then
    early = true
  elseif marked == nil or tick > marked then
    if top == nil or tick > top then top = tick end
    -- A schedule never ticked before starts at its first on-time tick: nothing of its past is missed.
    if marked ~= nil and tick <= missed_until then missed[#missed + 1] = i else on_time[#on_time + 1] = i end
  end
end
if top == nil or (marked ~= nil and top <= marked) then
  if early then return { 'early', mark, last, num(now) } end
  return { 'skipped', mark, last }
end

local chosen = {}
if catch_up == 'all' then
  for _, i in ipairs(missed) do chosen[#chosen + 1] = i end
elseif catch_up == 'last' and #missed > 0 then
  chosen[1] = missed[#missed]
end
for _, i in ipairs(on_time) do chosen[#chosen + 1] = i end

if #chosen == 0 then
  redis.call('HSET', H, F_TICK, num(top))
  return { 'skipped', num(top), last }
end
local flat, ticks = {}, {}
for _, i in ipairs(chosen) do
  for k = 0, 3 do flat[#flat + 1] = jobs[i + k] end
  ticks[#ticks + 1] = jobs[i + 1]
end
ARGV[1] = cmsgpack.pack(flat)
local pushed = push_body()
if type(pushed) == 'table' and pushed.err then return pushed end
local newest = ticks[#ticks]
redis.call('HSET', H, F_TICK, num(top), F_LAST, newest)
return { 'enqueued', num(top), newest, unpack(ticks) }
