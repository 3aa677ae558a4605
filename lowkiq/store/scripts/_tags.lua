-- Tags: each id's and the shard's index of them (docs/tags.md).

-- Tags (docs/tags.md). K_TAGS_OF: id -> msgpack array of its tags; K_TAGGED: "tag NUL id", all scored 0,
-- so one tag's ids are one ZRANGEBYLEX. Like its group, an id keeps its tags (the union of every version's)
-- while any copy of it is queued, in processing or in the morgue; they leave with its last copy. Shards
-- without a tagged id pay one EXISTS where ids leave.
local function tags_add(id, tags)
  local stored = redis.call('HGET', K_TAGS_OF, id)
  local list, have, index = {}, {}, {}
  if stored then
    list = cmsgpack.unpack(stored)
    for _, tag in ipairs(list) do have[tag] = true end
  end
  for _, tag in ipairs(tags) do
    if not have[tag] then
      have[tag] = true
      list[#list + 1] = tag
      index[#index + 1] = 0
      index[#index + 1] = tag .. '\0' .. id
    end
  end
  if #index > 0 then
    redis.call('HSET', K_TAGS_OF, id, cmsgpack.pack(list))
    call_chunked('ZADD', K_TAGGED, index, 2)
  end
end

-- ``ids`` just left the places not flagged: those with no copy left in the flagged ones lose their tags.
-- ``tagged`` false: the caller knows the shard holds no tags (nil: look).
local function tags_forget(ids, queued, processing, morgue, tagged)
  if #ids == 0 or tagged == false or redis.call('EXISTS', K_TAGS_OF) == 0 then return end
  for _, id in ipairs(ids) do
    local stored = redis.call('HGET', K_TAGS_OF, id)
    if stored and not (queued and redis.call('HEXISTS', K_PAYLOADS, id) == 1)
        and not (processing and redis.call('HEXISTS', K_PROCESSING, id) == 1)
        and not (morgue and redis.call('HEXISTS', K_M_PAYLOADS, id) == 1) then
      local members = {}
      for _, tag in ipairs(cmsgpack.unpack(stored)) do members[#members + 1] = tag .. '\0' .. id end
      call_chunked('ZREM', K_TAGGED, members, 1)
      redis.call('HDEL', K_TAGS_OF, id)
    end
  end
end
