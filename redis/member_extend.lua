-- Extend one holder's lease in a set of holders (read locks, semaphore
-- permits) if, and only if, it is there and has not expired.
--
-- KEYS[1] holders (sorted set: owner → expiry, ms)   KEYS[2] fence key
-- KEYS[3] (optional) a key that lives as long as the set: a semaphore's
--         number of permits
-- ARGV[1] owner   ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
--
-- Returns 1 if extended, 0 if the owner does not hold a lease.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if expiry <= now then
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if KEYS[3] and redis.call('PTTL', KEYS[3]) >= 0 then
  redis.call('PEXPIRE', KEYS[3], redis.call('PTTL', KEYS[1]))
end
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
