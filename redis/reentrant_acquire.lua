-- Take a reentrant lock, or take it again, and return its fencing token.
--
-- KEYS[1] lock hash   KEYS[2] fence key
-- ARGV[1] owner       ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
--
-- The hash holds one field per holder, the owner id, counting how often
-- it holds the lock, and the field '' (owner ids are never empty) with the
-- token of its first acquisition. Returns that token — the same one again
-- on every re-entry — or 0 if another owner holds the lock.

if redis.replicate_commands then
  redis.replicate_commands()
end

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  -- Never shorten: the owner's other leases count on the TTL they set.
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return tonumber(redis.call('HGET', KEYS[1], ''))
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end

-- The plain lock's token, on the same fence key.
local t = redis.call('TIME')
local token, err = next_token(tonumber(t[1]) * 1000000 + tonumber(t[2]), KEYS[2], KEYS[1])
if not token then
  return err
end
local tok = string.format('%.0f', token)
redis.call('HSET', KEYS[1], ARGV[1], 1, '', tok)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], tok, 'PX', math.max(tonumber(ARGV[3]), redis.call('PTTL', KEYS[2])))
return token
