-- Tell a waiter its place in a fair lock's queue.
--
-- KEYS[1] queue   KEYS[2] heartbeats
-- ARGV[1] owner
--
-- Returns the place (1: next), or 0 if the owner does not wait.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- As in fair_acquire.lua: at most 10 dead waiters per call.
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 10)
for _, w in ipairs(dead) do
  redis.call('ZREM', KEYS[1], w)
  redis.call('ZREM', KEYS[2], w)
end
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then
  return 0
end
return rank + 1
