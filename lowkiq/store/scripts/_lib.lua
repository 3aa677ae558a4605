-- The script libraries, prepended to every script after the locals naming its KEYS (K_READY, K_LEX, ...), which
-- lowkiq.store.keys.lua_prelude() writes from SCRIPT_KEYS: the one place their order is defined. One file per
-- topic, in the order of lowkiq.store.lua.LIBRARIES, each using only those listed earlier; a script gets the
-- definitions it uses, directly or through each other. A script's `--#rare name ...` line names definitions it
-- uses only on paths most calls skip: those (and what only they use) are built by rare(), which the script calls
-- before using them, so the other calls do not build their closures. This one: numbers as text, chunked calls,
-- the clock.

-- Lua turns numbers into strings with 14 digits; scores need all 17.
local function num(n)
  return string.format('%.17g', n)
end

-- Redis rejects commands with too many arguments for Lua's C stack; write in slices.
local CHUNK = 1000
local function call_chunked(cmd, key, args, step)
  local n = #args
  if n <= CHUNK * step then
    if n > 0 then redis.call(cmd, key, unpack(args)) end
    return
  end
  for i = 1, n, CHUNK * step do
    local last = math.min(i + CHUNK * step - 1, n)
    redis.call(cmd, key, unpack(args, i, last))
  end
end


-- The Redis server's clock from one TIME: in ms, and in seconds to the microsecond (a job's default
-- perform_in, so that a job is due as soon as it was pushed). Lease times are Redis server time
-- too: the clocks of the processes never have to agree.
local function server_clock()
  local t = redis.call('TIME')
  local seconds, micros = tonumber(t[1]), tonumber(t[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds + micros / 1000000
end

local function server_ms()
  return (server_clock())
end

-- A script's "now" in unix seconds, and the server's in ms (from the same TIME): ARGV's '' is the
-- Redis server's clock, which every process shares whatever its host's clock says; a number is the
-- caller's own clock (a hand-moved one in tests).
local function clock_now(arg)
  local now_ms, now = server_clock()
  if arg ~= '' then now = tonumber(arg) end
  return now, now_ms
end

-- Time scores (perform_in, a dead job's updated_at). Before layout 3 they were seconds as floats; a shard whose
-- lease hash says scores = 'us' is written in integer microseconds, which Redis keeps in small sorted sets
-- (listpacks) as integers, cheaper to compare and store. The two units never overlap: a score below US_AT is
-- seconds (until the year 33658), at or above it microseconds (any time after 1970-01-12), so a reader
-- understands either, whoever wrote it: a producer of an older version still writes seconds (docs/redis.md,
-- "Upgrading").
local US_AT = 1e12

-- A stored time score (a string or a number) in seconds, whichever unit it was written in.
local function secs(raw)
  local v = tonumber(raw)
  if v >= US_AT then return v / 1000000 end
  return v
end

-- Seconds as an integer microseconds score.
local function us_text(seconds)
  return string.format('%d', math.floor(seconds * 1000000 + 0.5))
end

-- Whether this shard's time scores are written in microseconds (read once per call).
local US_MODE = nil
local function us_mode()
  if US_MODE == nil then US_MODE = redis.call('HGET', K_LEASE, 'scores') == 'us' end
  return US_MODE
end

-- Seconds as this shard writes a time score.
local function time_score(seconds)
  if us_mode() then return us_text(seconds) end
  return num(seconds)
end
