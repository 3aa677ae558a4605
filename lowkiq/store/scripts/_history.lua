-- Each id's history (docs/history.md).

-- Each id's history (lowkiq.store.id_history, docs/history.md): a script call that moves ids writes one
-- entry into the shard's K_EVENTS stream, {k = its kind, d = msgpack of what happened}, and the stream
-- keeps its newest ``history_length`` entries (the holder of the lease trims them by age too). One XADD
-- per call, whatever the batch: a take and its ack are one entry. A worker's servers and producers say
-- its length: a script without the worker at hand reads the one the shard's holder wrote into K_LEASE.
local HISTORY_DEFAULT = 10000
-- The lease's fields as refusal() read them (nil when the script did not check a lease).
local LEASE = nil

-- The shard's history length: ``given`` ('' or nil: the one its holder wrote, else the default).
local function history_length(given)
  if given and given ~= '' then return tonumber(given) end
  local stored
  if LEASE then stored = LEASE.history else stored = redis.call('HGET', K_LEASE, 'history') end
  return tonumber(stored or HISTORY_DEFAULT)
end

local function history_add(length, kind, detail)
  if length > 0 then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', length, '*', 'k', kind, 'd', cmsgpack.pack(detail))
  end
end

-- An entry of a step the lease's holder took (after refusal()): {its member id, its fencing token as
-- "cfg_epoch:fence", ``thread`` or else the thread that took the shard's last batch, ...}.
local function history_held(length, kind, thread, ...)
  if length <= 0 then return end
  local owner, token = false, false
  if LEASE then
    owner, token = LEASE.owner or false, (LEASE.cfg_epoch or '0') .. ':' .. (LEASE.fence or '')
    thread = thread or LEASE.thread
  end
  history_add(length, kind, { owner, token, thread or false, ... })
end

-- A stored error as an entry keeps it: whole up to 4 KB; past that its text cut to 2 KB and its
-- traceback's last lines kept within 4 KB (where the exception was raised).
local HISTORY_ERROR_BYTES = 4096
local function history_error(raw)
  if not raw or #raw <= HISTORY_ERROR_BYTES then return raw or false end
  local es, elen, ts, tlen = error_split(raw)
  local text = string.sub(raw, es, es + math.min(elen, 2048) - 1)
  local traceback = ''
  if ts then
    local room = HISTORY_ERROR_BYTES - #text - 64
    traceback = string.sub(raw, math.max(ts, ts + tlen - room), ts + tlen - 1)
  end
  return TRACEBACK_MARK .. struct.pack('>I4', #text) .. text .. traceback
end
