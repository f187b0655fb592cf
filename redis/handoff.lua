-- Hand a lock over: release it for its owner and take it for the next
-- owner, in one atomic step and without a release notice (the releasing
-- client wakes the next owner itself).
--
-- KEYS[1] lock key   KEYS[2] fence key
-- ARGV[1] owner      ARGV[2] next owner   ARGV[3] lock TTL (ms)
-- ARGV[4] fence TTL (ms): lock TTL + grace
--
-- Returns the next owner's fencing token, or 0 if the owner does not hold
-- the lock (then nothing changes).

if redis.replicate_commands then
  redis.replicate_commands()
end

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])

local t = redis.call('TIME')
local token, err = next_token(tonumber(t[1]) * 1000000 + tonumber(t[2]), KEYS[2], KEYS[1])
if not token then
  return err
end
redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[4])
return token
