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

-- share_token is next_token for a grant at t (TIME's reply) on a lock
-- that several leases may hold: it also stores the token in the fence
-- key, which then lives fence_ttl ms or as long as it had, whichever is
-- longer. Returns the token, or nil and an error reply.
local function share_token(t, fence_key, lock_key, fence_ttl)
  local token, err = next_token(tonumber(t[1]) * 1000000 + tonumber(t[2]), fence_key, lock_key)
  if not token then
    return nil, err
  end
  redis.call('SET', fence_key, string.format('%.0f', token), 'PX', math.max(tonumber(fence_ttl), redis.call('PTTL', fence_key)))
  return token
end

-- fresh_start is where the token of a key whose fence key is gone starts
-- when the grant's time now (µs) is a client's reading of the server
-- clock: margin µs above the greater of now and the server's TIME. The
-- fence outlives the key's last grant by the lock TTL and a grace by the
-- server's clock, far more than two clients' readings differ (margin),
-- unless the server's clock jumped forward meanwhile (a clock stepped
-- back and set right, an NTP step): the fence then ends at once, and a
-- reading that erred low, or was taken while the clock stood back, would
-- start below the last token. TIME has jumped with the clock.
local function fresh_start(now, margin)
  local t = redis.call('TIME')
  return room_up(math.max(now, tonumber(t[1]) * 1000000 + tonumber(t[2])) + margin)
end

-- issue_token is next_token for a grant at now (µs) that also stores the
-- token in the fence key with a life of fence_ttl ms. On Redis 7.0 and
-- later it reads the last token with the same write (SET … GET): one
-- command, and a second one only when the last token is not below now,
-- or when margin (µs) is above 0 and the fence key was gone (fresh_start:
-- TIME and the write again).
local function issue_token(now, fence_key, lock_key, fence_ttl, margin)
  now = room_up(now)
  if now >= 9007199254740992 then
    return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
  end
  -- %.0f: Redis would turn a number into a string with %.14g and round it.
  local s = string.format('%.0f', now)
  local last
  if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
    local got = redis.call('SET', fence_key, s, 'PX', fence_ttl, 'GET')
    if not got and margin > 0 then
      now = fresh_start(now, margin)
      if now >= 9007199254740992 then
        redis.call('DEL', fence_key)
        return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
      end
      redis.call('SET', fence_key, string.format('%.0f', now), 'PX', fence_ttl)
      return now
    end
    last = tonumber(got or '0') or 0
    if last < now then
      return now
    end
  else
    local got = redis.call('GET', fence_key)
    if not got and margin > 0 then
      now = fresh_start(now, margin)
      if now >= 9007199254740992 then
        return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
      end
      s = string.format('%.0f', now)
    end
    last = tonumber(got or '0') or 0
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
