-- Leases: the fence every script that changes a shard's processing area checks, restores and acks.

-- Fencing: nil when ``grant`` holds this shard's lease now, else the error reply that
-- refuses the caller (FENCED: another grant or a release came since; LEASE_EXPIRED: nobody
-- renewed it in time, so another process may take it over at any moment).
local function refusal(grant, now_ms)
  local lease = redis.call('HMGET', K_LEASE, 'grant', 'state', 'expires_ms', 'owner', 'cfg_epoch', 'fence', 'history',
    'thread', 'performing', 'scores')
  if lease[1] ~= grant or lease[2] ~= 'held' then
    return redis.error_reply('FENCED ' .. K_LEASE .. ' is not held by grant ' .. tostring(grant))
  end
  local late = now_ms - tonumber(lease[3])
  if late > 0 then
    return redis.error_reply('LEASE_EXPIRED ' .. K_LEASE .. ' expired ' .. late .. ' ms ago')
  end
  LEASE = { owner = lease[4], cfg_epoch = lease[5], fence = lease[6], history = lease[7], thread = lease[8],
    performing = lease[9] }
  US_MODE = lease[10] == 'us'
  return nil
end

-- Every job left in processing goes back to the queue (merge rule "failed job": its own
-- retry_count, perform_in and error win). Returns their ids.
local function restore_processing()
  local records = redis.call('HGETALL', K_PROCESSING)
  local ids = {}
  for i = 1, #records, 2 do
    local retry_count, perform_in, err, payloads = cmsgpack.unpack(records[i + 1])
    queue_put(records[i], payloads, perform_in, retry_count, err, false)
    ids[#ids + 1] = records[i]
  end
  redis.call('DEL', K_PROCESSING)
  return ids
end

-- Acknowledged ids (ARGV[first..]) leave processing and count as processed; a crash count
-- they carried is over, and so are their group and tags unless a copy of the id is left. ``crashes``,
-- ``grouped``: whether the shard holds crash counts, groups (nil: look); ``tagged`` false: it holds no tags.
local function acknowledge(first, crashes, grouped, tagged)
  if #ARGV < first then return {} end
  local n = 0
  if crashes == nil then crashes = redis.call('EXISTS', K_CRASHES) == 1 end
  if grouped == nil then grouped = redis.call('EXISTS', K_GROUP_OF) == 1 end
  for i = first, #ARGV, CHUNK do
    local last = math.min(i + CHUNK - 1, #ARGV)
    n = n + redis.call('HDEL', K_PROCESSING, unpack(ARGV, i, last))
    if crashes then redis.call('HDEL', K_CRASHES, unpack(ARGV, i, last)) end
  end
  if grouped then
    for i = first, #ARGV do group_forget(ARGV[i], true, false, true) end
  end
  if n > 0 then redis.call('HINCRBY', K_COUNTERS, 'processed', n) end
  local ids = {}
  for i = first, #ARGV do ids[#ids + 1] = ARGV[i] end
  tags_forget(ids, true, false, true, tagged)
  return ids
end
