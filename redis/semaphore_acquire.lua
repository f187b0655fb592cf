-- Take one permit of a semaphore and return its fencing token.
--
-- KEYS[1] holders (sorted set: owner → expiry of its permit, ms)   KEYS[2] fence key
-- ARGV[1] owner   ARGV[2] permit TTL (ms)   ARGV[3] fence TTL (ms): permit TTL + grace
-- ARGV[4] number of permits
--
-- Returns the token, or 0 when every permit is held. An owner that holds
-- a permit already gets it anew, as a retry whose reply was lost must.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Only expired permits go, in one command: no loop.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end

local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
-- The set lives as long as its longest permit.
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end

-- The plain lock's token, on the same fence key.
local token, err = next_token(tonumber(t[1]) * 1000000 + tonumber(t[2]), KEYS[2], KEYS[1])
if not token then
  return err
end
redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', math.max(tonumber(ARGV[3]), redis.call('PTTL', KEYS[2])))
return token
