-- Takes a bulk action's confirmation, once, when it confirms what the caller is about to do.
-- KEYS are ConfirmKeys.all(): the scope hash, the ids list, the used mark.
-- ARGV[1] = seconds a used token is remembered, ARGV[2..] = field, value, ... that the scope must hold
-- Returns {'ok', count} (the token is used from now on), {'used'}, {'missing'} (expired or never
-- issued), or {'mismatch', field, the token's value}: then nothing changed.
local scope, used = KEYS[1], KEYS[3]
if redis.call('EXISTS', scope) == 0 then
  if redis.call('EXISTS', used) == 1 then return {'used'} end
  return {'missing'}
end
for i = 2, #ARGV, 2 do
  local value = redis.call('HGET', scope, ARGV[i])
  if value ~= ARGV[i + 1] then return {'mismatch', ARGV[i], value or ''} end
end
local count = redis.call('HGET', scope, 'count')
redis.call('DEL', scope)
redis.call('SET', used, '1', 'EX', tonumber(ARGV[1]))
return {'ok', count}
