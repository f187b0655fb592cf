-- Take the lock in queue order (the fair lock), and keep a waiter's place.
--
-- KEYS[1] lock key (the plain lock's)   KEYS[2] fence key
-- KEYS[3] queue (sorted set: owner → arrival number)
-- KEYS[4] heartbeats (sorted set: owner → when it is given up, ms)
-- KEYS[5] arrival counter
-- ARGV[1] owner   ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
-- ARGV[4] waiter timeout (ms)
-- ARGV[5] '1': wait — join the queue if absent and renew the heartbeat;
--         '0': try — take the lock only if nobody else waits
--
-- Returns the fencing token if the owner took the lock (and left the
-- queue); otherwise, when waiting, minus its place in the queue (-1: next),
-- and when trying, 0.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Waiters whose heartbeat stopped (crashed processes) age out; at most
-- 10 per call, so the script stays short however many died at once.
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 10)
for _, w in ipairs(dead) do
  redis.call('ZREM', KEYS[3], w)
  redis.call('ZREM', KEYS[4], w)
end

local waiting = ARGV[5] == '1'
local rank = redis.call('ZRANK', KEYS[3], ARGV[1])
if not rank then
  if waiting then
    redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[5]), ARGV[1])
    rank = redis.call('ZCARD', KEYS[3]) - 1
  elseif redis.call('EXISTS', KEYS[3]) == 1 then
    return 0
  end
end

if not rank or rank == 0 then
  local took = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
  local holder = not took and redis.call('GET', KEYS[1])
  if holder == ARGV[1] or holder == ARGV[1] .. '\1' then
    -- A retry whose reply was lost: take it anew.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    took = true
  end
  if took then
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('ZREM', KEYS[4], ARGV[1])
    if redis.call('EXISTS', KEYS[3]) == 0 then
      redis.call('DEL', KEYS[4], KEYS[5])
    end
    -- The plain lock's token, on the same fence key.
    local token, err = next_token(tonumber(t[1]) * 1000000 + tonumber(t[2]), KEYS[2], KEYS[1])
    if not token then
      return err
    end
    redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3])
    return token
  end
end
if not waiting then
  return 0
end

-- The queue's keys live as long as some waiter keeps beating.
local timeout = tonumber(ARGV[4])
redis.call('ZADD', KEYS[4], now + timeout, ARGV[1])
for i = 3, 5 do
  redis.call('PEXPIRE', KEYS[i], timeout)
end
return -(rank + 1)
