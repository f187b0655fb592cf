-- Take a read lock and return its fencing token.
--
-- KEYS[1] readers (sorted set: owner → expiry, ms)   KEYS[2] writer
-- KEYS[3] waiting writers (sorted set: owner → expiry of its claim, ms)   KEYS[4] fence key
-- ARGV[1] owner   ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
--
-- Returns the token, or 0 while a writer holds the lock or waits for it
-- (writer preference). A reader that holds it already is renewed, as a
-- retry whose reply was lost must be.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Only expired entries go, in one command each: no loop.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('ZCARD', KEYS[3]) > 0 then
    return 0
  end
end

local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
-- The set lives as long as its longest lease.
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end

-- The plain lock's token, on the same fence key.
local token, err = share_token(t, KEYS[4], KEYS[1], ARGV[3])
if not token then
  return err
end
return token
