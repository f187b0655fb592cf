-- Raise the fencing state of a lock kind's hold, so that every later
-- token of the key is greater than a given one, if and only if the owner
-- holds it: a Redlock of lock-kind views writes its token back with it.
--
-- KEYS[1] the kind's holders   KEYS[2] fence key
-- ARGV[1] owner   ARGV[2] token (below 2^53)   ARGV[3] grace (ms)
-- ARGV[4] how KEYS[1] names holders: 'hash' (a reentrant lock: a field per
--         owner), 'set' (read locks, semaphore permits: a sorted set of
--         owner → expiry, ms) or 'string' (a writer: the owner)
--
-- Returns 1 if the owner holds it (the fence is then at least the token
-- and outlives the hold by the grace), 0 if it does not.

if redis.replicate_commands then
  redis.replicate_commands()
end

local kind, owner = ARGV[4], ARGV[1]
local held
if kind == 'hash' then
  held = redis.call('HEXISTS', KEYS[1], owner) == 1
elseif kind == 'set' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  held = (tonumber(redis.call('ZSCORE', KEYS[1], owner) or '0') or 0) > now
elseif kind == 'string' then
  local holder = redis.call('GET', KEYS[1])
  held = holder == owner or holder == owner .. '\1'
else
  return redis.error_reply('turnstile: unknown holders kind ' .. tostring(kind))
end
if not held then
  return 0
end
local token = tonumber(ARGV[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if token > last then
  -- %.0f: Redis would turn a number into a string with %.14g and round it.
  redis.call('SET', KEYS[2], string.format('%.0f', token))
end
local want = redis.call('PTTL', KEYS[1]) + tonumber(ARGV[3])
if redis.call('PTTL', KEYS[2]) < want then
  redis.call('PEXPIRE', KEYS[2], want)
end
return 1
