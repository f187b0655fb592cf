-- Extend a reentrant lock if, and only if, the owner holds it.
--
-- KEYS[1] lock hash   KEYS[2] fence key
-- ARGV[1] owner       ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
--
-- Returns 1 if the owner holds the lock, 0 if not. The lock then lives at
-- least the TTL from now: the owner may hold it through several leases,
-- so one with a shorter TTL never cuts short the others.

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
