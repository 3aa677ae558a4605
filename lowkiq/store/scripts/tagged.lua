-- One tag's ids in one shard, by id (docs/tags.md): a read, whose cost is the page's, not the queue's.
-- ARGV[1] = the tag, ARGV[2] = the id to start after ('' : from the first), ARGV[3] = how many ids at most
-- Returns {id, its tags (msgpack array), where it is ('q' queued, 'p' in processing, 'm' in the morgue,
-- in that order), ...}.
local tag, after, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local low = '[' .. tag .. '\0'
if after ~= '' then low = '(' .. tag .. '\0' .. after end
local members = redis.call('ZRANGEBYLEX', K_TAGGED, low, '(' .. tag .. '\1', 'LIMIT', 0, limit)
local out = {}
for _, member in ipairs(members) do
  local id = string.sub(member, #tag + 2)
  local places = ''
  if redis.call('HEXISTS', K_PAYLOADS, id) == 1 then places = places .. 'q' end
  if redis.call('HEXISTS', K_PROCESSING, id) == 1 then places = places .. 'p' end
  if redis.call('HEXISTS', K_M_PAYLOADS, id) == 1 then places = places .. 'm' end
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', K_TAGS_OF, id) or ''
  out[#out + 1] = places
end
return out
