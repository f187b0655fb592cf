-- Release a reentrant lock once, if the owner holds it; the last release
-- frees it and tells waiters.
--
-- KEYS[1] lock hash   KEYS[2] fence key
-- ARGV[1] owner       ARGV[2] grace (ms)   ARGV[3] release channel (not a key; see release.lua)
--
-- Returns 1 if the owner held the lock, 0 if it did not.

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
  return 1
end
redis.call('DEL', KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
  redis.call('SPUBLISH', ARGV[3], '1')
else
  redis.call('PUBLISH', ARGV[3], '1')
end
return 1
