-- The fencing token every lock kind issues (prepended to the scripts that
-- grant a lock): a hybrid logical clock, greater than the key's last token
-- while its fence key exists, and the server time in microseconds, which
-- has moved past every earlier token, once the fence key is gone
-- (eviction, restart). Returns the token, or nil and an error reply.
--
-- Every token is a multiple of ROOM (the Go side's tokenRoom), so the
-- next grant's token is at least ROOM above the last: a Client hands a
-- held lock to its own next waiter with the token plus one, up to
-- ROOM − 1 times, without asking the store (driver.TokenRoom).
local ROOM = 16

-- room_up is the first multiple of ROOM at or above n.
local function room_up(n)
  local r = n % ROOM
  if r == 0 then
    return n
  end
  return n - r + ROOM
end

local function next_token(now, fence_key, lock_key)
  local token = room_up(now)
  local last = tonumber(redis.call('GET', fence_key) or '0') or 0
  if last >= token then
    token = room_up(last + 1)
  end
  -- Lua numbers are doubles: integers are exact only below 2^53.
  if token >= 9007199254740992 then
    return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
  end
  return token
end

-- issue_token is next_token for a grant at now (µs) that also stores the
-- token in the fence key with a life of fence_ttl ms. On Redis 7.0 and
-- later it reads the last token with the same write (SET … GET): one
-- command, and a second one only when the last token is not below now.
local function issue_token(now, fence_key, lock_key, fence_ttl)
  now = room_up(now)
  if now >= 9007199254740992 then
    return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
  end
  -- %.0f: Redis would turn a number into a string with %.14g and round it.
  local s = string.format('%.0f', now)
  local last
  if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
    last = tonumber(redis.call('SET', fence_key, s, 'PX', fence_ttl, 'GET') or '0') or 0
    if last < now then
      return now
    end
  else
    last = tonumber(redis.call('GET', fence_key) or '0') or 0
    if last < now then
      redis.call('SET', fence_key, s, 'PX', fence_ttl)
      return now
    end
  end
  local token = room_up(last + 1)
  if token >= 9007199254740992 then
    -- Keep the last token (the write above replaced it) and refuse.
    redis.call('SET', fence_key, string.format('%.0f', last), 'PX', fence_ttl)
    return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
  end
  redis.call('SET', fence_key, string.format('%.0f', token), 'PX', fence_ttl)
  return token
end

-- clock_now is the time (µs) a grant's token starts from: the client's
-- reading of this server's clock (floor, µs), or the server's TIME when
-- the client has none ('0').
local function clock_now(floor)
  local f = tonumber(floor) or 0
  if f > 0 then
    return f
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
