-- Acquire a lock and issue its fencing token, in one atomic step.
--
-- KEYS[1] lock key   KEYS[2] fence key   KEYS[3] start marker (only with a quarantine)
-- ARGV[1] owner      ARGV[2] lock TTL (ms)   ARGV[3] fence TTL (ms): lock TTL + grace
-- ARGV[4] restart quarantine (ms), given with KEYS[3]
--
-- Returns the fencing token; 0 if another owner holds the lock; -n if the
-- server process started less than the quarantine ago and refuses every
-- lock for n ms more.

-- Redis < 5 refuses writes after TIME unless effects are replicated; later
-- versions always replicate effects.
if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

if KEYS[3] then
  -- The marker holds the time (µs) this server process started. A restart
  -- without persistence loses it with the locks; the first acquisition
  -- after that reads the start time from INFO (once per marker, not per
  -- call: INFO is slow) and writes it back.
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
  local left = started + tonumber(ARGV[4]) * 1000 - now
  if left > 0 then
    return -math.ceil(left / 1000)
  end
end

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Held: by us if this is a retry whose reply was lost, then take it anew.
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end

local token, err = next_token(now, KEYS[2], KEYS[1])
if not token then
  return err
end
-- %.0f: Redis would turn a number into a string with %.14g and round it.
redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3])
return token
