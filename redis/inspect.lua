-- Read a lock's state without changing anything (turnstile status, ls).
--
-- KEYS[1] lock key   KEYS[2] fence key
-- KEYS[3] heartbeats of the fair queue (sorted set: owner → when it is
--         given up, ms), given only by the fair view
--
-- Returns four strings: the holder's owner id ('' if the key holds no
-- string: free, or not a lock), the lock's PTTL in ms (-2 missing, -1 no
-- expiry), the fence key's last token ('0' if gone), and the number of
-- live waiters in the fair queue ('-1' without KEYS[3]).

local owner = ''
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  -- Without the byte that marks a lock waited for (acquire.lua).
  owner = string.gsub(redis.call('GET', KEYS[1]), '\1$', '')
end
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2]) or '0'
local waiters = -1
if KEYS[3] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  waiters = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
end
return {owner, tostring(pttl), fence, tostring(waiters)}
