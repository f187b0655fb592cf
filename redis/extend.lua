-- Extend a lock if, and only if, the owner still holds it.
--
-- KEYS[1] lock key   KEYS[2] fence key
-- ARGV[1] owner      ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
--
-- Returns 1 if extended, 0 if the owner does not hold the lock.

local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] and holder ~= ARGV[1] .. '\1' then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- The fence must outlive the lock by the grace period.
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
