-- Group limits (docs/fairness.md): the holder's ids finished (acknowledged, failed or given back): their
-- permits end now. KEYS[1] = the group's permits zset, KEYS[2] = its starts zset (unused: a start counts
-- for its whole period). ARGV = members. Returns how many permits ended.
return redis.call('ZREM', KEYS[1], unpack(ARGV))
