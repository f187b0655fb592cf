-- Take one permit of a semaphore and return its fencing token.
--
-- KEYS[1] holders (sorted set: owner → expiry of its permit, ms)   KEYS[2] fence key
-- KEYS[3] the number of permits, stored while any permit is held
-- ARGV[1] owner   ARGV[2] permit TTL (ms)   ARGV[3] fence TTL (ms): permit TTL + grace
-- ARGV[4] number of permits
--
-- Returns the token; 0 when every permit is held; or minus the stored
-- number when permits are held with a number other than ARGV[4]. An
-- owner that holds a permit already gets it anew, as a retry whose reply
-- was lost must.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local permits = tonumber(ARGV[4])
-- Only expired permits go, in one command: no loop.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held > 0 then
  -- While permits are held, their number is the one stored. Permits
  -- taken by a version that stored none leave none: the caller's holds.
  local stored = tonumber(redis.call('GET', KEYS[3]) or '')
  if stored and stored ~= permits then
    return -stored
  end
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and held >= permits then
  return 0
end

local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
-- The set lives as long as its longest permit, and the number with it.
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
redis.call('SET', KEYS[3], ARGV[4], 'PX', redis.call('PTTL', KEYS[1]))

-- The plain lock's token, on the same fence key.
local token, err = share_token(t, KEYS[2], KEYS[1], ARGV[3])
if not token then
  return err
end
return token
