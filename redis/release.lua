-- Release a lock if, and only if, the owner holds it, and tell waiters.
--
-- KEYS[1] lock key   KEYS[2] fence key   KEYS[3] release channel
-- ARGV[1] owner      ARGV[2] grace (ms)
--
-- Returns 1 if released, 0 if the owner does not hold the lock.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
-- Keep the last token for the grace period only, so that memory stays
-- bounded however many distinct keys are ever locked.
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PUBLISH', KEYS[3], '1')
return 1
