-- Take a waiter out of a fair lock's queue.
--
-- KEYS[1] queue   KEYS[2] heartbeats   KEYS[3] arrival counter
-- ARGV[1] owner   ARGV[2] release channel (not a key; see release.lua)
--
-- Returns 1 if the owner was queued, 0 if not. When the first waiter
-- leaves, the next one is told at once, as after a release: the lock may
-- be free.

local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2], KEYS[3])
elseif rank == 0 then
  if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
    redis.call('SPUBLISH', ARGV[2], '1')
  else
    redis.call('PUBLISH', ARGV[2], '1')
  end
end
return 1
