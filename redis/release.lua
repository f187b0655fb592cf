-- Release a lock if, and only if, the owner holds it, and tell waiters.
--
-- KEYS[1] lock key   KEYS[2] fence key
-- ARGV[1] owner      ARGV[2] grace (ms)  ARGV[3] release channel
-- ARGV[4] "quiet" to release without the notice (the releasing client
--         hands the lock to a waiter of its own)
--
-- Returns 1 if released, 0 if the owner does not hold the lock.
--
-- The channel is passed in ARGV: it is no key. While Redis Cluster
-- migrates the lock's slot, the old owner refuses (TRYAGAIN) a script that
-- names both keys it holds and keys it lacks, and a channel named in KEYS
-- is a key it always lacks.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
-- Keep the last token for the grace period only, so that memory stays
-- bounded however many distinct keys are ever locked.
redis.call('PEXPIRE', KEYS[2], ARGV[2])
-- Sharded pub/sub keeps the notice on the node that owns the key's slot,
-- where PUBLISH would be broadcast to every node of a cluster. Redis 7.0
-- brought both SPUBLISH and REDIS_VERSION_NUM; Released subscribes with
-- SSUBSCRIBE, or SUBSCRIBE where the server does not know it, to match.
if ARGV[4] == 'quiet' then
  return 1
end
local channel = ARGV[3]
if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
  redis.call('SPUBLISH', channel, '1')
else
  redis.call('PUBLISH', channel, '1')
end
return 1
