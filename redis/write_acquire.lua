-- Take a write lock and return its fencing token.
--
-- KEYS[1] writer   KEYS[2] readers (sorted set: owner → expiry, ms)
-- KEYS[3] waiting writers (sorted set: owner → expiry of its claim, ms)   KEYS[4] fence key
-- ARGV[1] owner   ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
-- ARGV[4] how long a waiting writer's claim lasts (ms)
--
-- Returns the token, or 0 while another writer or any reader holds the
-- lock; then the writer's claim keeps new readers out until it takes the
-- lock or the claim expires unrenewed. A writer that holds the lock
-- already gets it anew, as a retry whose reply was lost must.

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = redis.call('GET', KEYS[1])
local free = not holder
if free then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  free = redis.call('ZCARD', KEYS[2]) == 0
end
if not free and holder ~= ARGV[1] and holder ~= ARGV[1] .. '\1' then
  local claim = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], now + claim, ARGV[1])
  if redis.call('PTTL', KEYS[3]) < claim then
    redis.call('PEXPIRE', KEYS[3], claim)
  end
  return 0
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])

-- The plain lock's token, on the same fence key.
local token, err = share_token(t, KEYS[4], KEYS[1], ARGV[3])
if not token then
  return err
end
return token
