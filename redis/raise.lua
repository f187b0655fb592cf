-- Raise the fencing state of a held lock, so that every later token of the
-- key is greater than a given one, if and only if the owner holds the lock.
--
-- KEYS[1] lock key   KEYS[2] fence key
-- ARGV[1] owner      ARGV[2] token (below 2^53)   ARGV[3] grace (ms)
--
-- Returns 1 if the owner holds the lock (the fence is then at least the
-- token), 0 if it does not (nothing changes).

local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] and holder ~= ARGV[1] .. '\1' then
  return 0
end
-- The fence must outlive the lock by the grace period, as the acquire and
-- extend scripts keep it; a lock without expiry keeps its fence forever.
local pttl = redis.call('PTTL', KEYS[1])
local token = tonumber(ARGV[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if token > last then
  -- %.0f: Redis would turn a number into a string with %.14g and round it.
  redis.call('SET', KEYS[2], string.format('%.0f', token))
elseif pttl < 0 then
  redis.call('PERSIST', KEYS[2])
end
if pttl >= 0 then
  local want = pttl + tonumber(ARGV[3])
  if redis.call('PTTL', KEYS[2]) < want then
    redis.call('PEXPIRE', KEYS[2], want)
  end
end
return 1
