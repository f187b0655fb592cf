-- Acquire a lock and issue its fencing token, in one atomic step.
--
-- KEYS[1] lock key   KEYS[2] fence key   KEYS[3] start marker (only with a quarantine)
-- ARGV[1] owner      ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
-- ARGV[4] the client's reading of the server clock (µs); '0': read TIME
-- ARGV[5] margin (µs) of a token whose fence key is gone above the greater
--         of ARGV[4] and TIME (token.lua's fresh_start); '0': none, the
--         token is ARGV[4] (a Redlock's reading, the same on every node)
-- ARGV[6] restart quarantine (ms), given with KEYS[3]
--
-- Returns the fencing token; 0 if another owner holds the lock; -n if the
-- server process started less than the quarantine ago and refuses every
-- lock for n ms more.
--
-- The lock key holds the owner id, followed by the byte \1 once someone
-- failed to take it: the release then sends a notice (release.lua); or
-- \1 alone, a free lock that a client of version 0.1 released quietly
-- while others waited (it expires after the fence grace). Owner ids hold
-- no control characters.

-- Redis < 5 refuses writes after TIME unless effects are replicated; later
-- versions always replicate effects.
if redis.replicate_commands then
  redis.replicate_commands()
end

local now = clock_now(ARGV[4])

if KEYS[3] then
  -- The marker holds the time (µs) this server process started. A restart
  -- without persistence loses it with the locks; the first acquisition
  -- after that reads the start time from INFO (once per marker, not per
  -- call: INFO is slow) and writes it back.
  --
  -- now is the client's reading of this clock when it has one: it errs
  -- high by a round trip at most, so the quarantine may end that much
  -- early, and a start time derived from it is that much late.
  local started = tonumber(redis.call('GET', KEYS[3]) or '')
  if not started or started > now then -- missing, garbled, or the clock stepped back
    -- uptime_in_seconds counts whole seconds between two readings of a
    -- clock in whole seconds, so it may be up to a second more than the
    -- time since the start: count one second less, never from before the
    -- start.
    local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)') or '') or 0
    started = now - math.max(up - 1, 0) * 1000000
    redis.call('SET', KEYS[3], string.format('%.0f', started))
  end
  local left = started + tonumber(ARGV[6]) * 1000 - now
  if left > 0 then
    return -math.ceil(left / 1000)
  end
end

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local holder = redis.call('GET', KEYS[1])
  if holder == '\1' then
    -- Free, released quietly by a client of version 0.1 while others
    -- waited: take it with the mark.
    redis.call('SET', KEYS[1], ARGV[1] .. '\1', 'PX', ARGV[2])
  elseif holder ~= ARGV[1] and holder ~= ARGV[1] .. '\1' then
    -- Held by another owner: mark it waited for, so that its release
    -- tells the waiters.
    if string.byte(holder, -1) ~= 1 then
      redis.call('APPEND', KEYS[1], '\1')
    end
    return 0
  else
    -- Held by us: a retry whose reply was lost. Take it anew.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
end

local token, err = issue_token(now, KEYS[2], KEYS[1], ARGV[3], tonumber(ARGV[5]) or 0)
if not token then
  return err
end
return token
