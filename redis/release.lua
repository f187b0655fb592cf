-- Release a lock if, and only if, the owner holds it, and tell waiters.
--
-- KEYS[1] lock key   KEYS[2] fence key (not touched: see below)
-- ARGV[1] owner      ARGV[2] release channel
-- ARGV[3] when to send the release notice: '' when someone failed to
--         take the lock while it was held (acquire.lua marks the lock
--         then); 'always' in any case (an election's resignation, whose
--         observers try nothing and so never mark it)
--
-- Returns 1 if released, 2 if released when someone had failed to take it
-- (the lock was marked), 0 if the owner does not hold the lock.
--
-- The channel is passed in ARGV: it is no key. While Redis Cluster
-- migrates the lock's slot, the old owner refuses (TRYAGAIN) a script that
-- names both keys it holds and keys it lacks, and a channel named in KEYS
-- is a key it always lacks.
--
-- The fence key keeps the last token until the lock TTL + grace after the
-- last grant or renewal (acquire.lua, extend.lua) set its expiry: memory
-- stays bounded however many distinct keys are ever locked, without a
-- write here.

local holder = redis.call('GET', KEYS[1])
local marked = holder == ARGV[1] .. '\1'
if holder ~= ARGV[1] and not marked then
  return 0
end
local released = 1
if marked then
  released = 2
end
redis.call('DEL', KEYS[1])
if not marked and ARGV[3] ~= 'always' then
  return released
end
-- Sharded pub/sub keeps the notice on the node that owns the key's slot,
-- where PUBLISH would be broadcast to every node of a cluster. Redis 7.0
-- brought both SPUBLISH and REDIS_VERSION_NUM; Released subscribes with
-- SSUBSCRIBE, or SUBSCRIBE where the server does not know it, to match.
local channel = ARGV[2]
if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
  redis.call('SPUBLISH', channel, '1')
else
  redis.call('PUBLISH', channel, '1')
end
return released
