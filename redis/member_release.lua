-- Release one holder's lease in a set of holders (read locks, semaphore
-- permits) if, and only if, it is there and has not expired, and tell
-- waiters.
--
-- KEYS[1] holders (sorted set: owner → expiry, ms)   KEYS[2] fence key
-- KEYS[3] (optional) a key that goes with the last holder: a semaphore's
--         number of permits
-- ARGV[1] owner   ARGV[2] grace (ms)   ARGV[3] release channel (not a key; see release.lua)
-- ARGV[4] '1': publish on every release (a permit is free);
--         '0': only when the last holder leaves (a writer may enter)
--
-- Returns 1 if released, 0 if the owner did not hold a lease.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if expiry == 0 then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
if expiry <= now then
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local empty = redis.call('ZCARD', KEYS[1]) == 0
if empty then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  if KEYS[3] then
    redis.call('DEL', KEYS[3])
  end
end
if empty or ARGV[4] == '1' then
  if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
    redis.call('SPUBLISH', ARGV[3], '1')
  else
    redis.call('PUBLISH', ARGV[3], '1')
  end
end
return 1
