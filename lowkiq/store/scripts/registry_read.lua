-- Reads the registry for the console, bounded whatever others wrote into it: at most ARGV[1] entries,
-- and no name or entry longer than ARGV[2] bytes crosses the wire (register() writes neither).
-- KEYS are RegistryKeys.all(): the registry hash. ARGV[1] = entries at most, ARGV[2] = bytes at most
-- Returns {entries the hash holds, name, name's size, entry ('' when too long), entry's size, ...}.
local max, max_bytes = tonumber(ARGV[1]), tonumber(ARGV[2])
local size = redis.call('HLEN', KEYS[1])
local out = {size}
local read = 0
local function add(name, value)
  out[#out + 1] = string.sub(name, 1, max_bytes)
  out[#out + 1] = #name
  out[#out + 1] = (#value <= max_bytes and value) or ''
  out[#out + 1] = #value
  read = read + 1
end
if size <= max then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do add(all[i], all[i + 1]) end
  return out
end
-- Past the bound (entries written by something other than register()): the first ``max`` a scan
-- meets; HSCAN visits about COUNT fields per call, so the script's work stays near ``max``.
local seen = {}
local cursor = '0'
repeat
  local reply = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 100)
  cursor = reply[1]
  local fields = reply[2]
  for i = 1, #fields, 2 do
    if read >= max then break end
    if not seen[fields[i]] then
      seen[fields[i]] = true
      add(fields[i], fields[i + 1])
    end
  end
until cursor == '0' or read >= max
return out
