-- Apply a write only if its fencing token is fresh, and record the token,
-- in one atomic step.
--
-- KEYS[1] guard key (last accepted token)   KEYS[2] data key
-- ARGV[1] token: decimal, no leading zeros   ARGV[2] '1' to accept a token
-- equal to the last one   ARGV[3] 'set' or 'incrby'   ARGV[4] value or delta
--
-- Returns {1, reply of the write} if the write was applied, {0, last
-- token} if the token is stale (nothing changes).

local token, last = ARGV[1], redis.call('GET', KEYS[1])
if last then
  if #last > 20 or not string.match(last, '^[1-9]%d*$') then
    return redis.error_reply('turnstile: fence guard key ' .. KEYS[1] .. ' holds no token')
  end
  -- Compare as numbers of up to 20 digits without floating point (Lua
  -- numbers are doubles, exact only below 2^53): by length, then the
  -- digits above the last ten, then the last ten.
  local d = #token - #last
  if d == 0 then
    d = (tonumber(string.sub(token, 1, -11)) or 0) - (tonumber(string.sub(last, 1, -11)) or 0)
  end
  if d == 0 then
    d = tonumber(string.sub(token, -10)) - tonumber(string.sub(last, -10))
  end
  if d < 0 or d == 0 and ARGV[2] ~= '1' then
    return {0, last}
  end
end

-- Write first: a write that fails (INCRBY on a value that is no integer)
-- changes nothing, and then the token is not recorded either.
local r
if ARGV[3] == 'incrby' then
  r = redis.call('INCRBY', KEYS[2], ARGV[4])
else
  redis.call('SET', KEYS[2], ARGV[4])
  r = 0
end
redis.call('SET', KEYS[1], token)
return {1, r}
