-- Hand a lock over: release it for its owner and take it for the next
-- owner, in one atomic step and without a release notice (the releasing
-- client wakes the next owner itself).
--
-- KEYS[1] lock key   KEYS[2] fence key
-- ARGV[1] owner      ARGV[2] next owner   ARGV[3] lock TTL (ms)
-- ARGV[4] fence TTL (ms): lock TTL + grace
-- ARGV[5] the client's reading of the server clock (µs); '0': read TIME
--
-- Returns the next owner's fencing token, or 0 if the owner does not hold
-- the lock (then nothing changes).

if redis.replicate_commands then
  redis.replicate_commands()
end

local holder = redis.call('GET', KEYS[1])
local next_owner = ARGV[2]
if holder == ARGV[1] .. '\1' then
  -- Waited for by others too: the next owner's release must tell them.
  next_owner = next_owner .. '\1'
elseif holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], next_owner, 'PX', ARGV[3])

local token, err = issue_token(clock_now(ARGV[5]), KEYS[2], KEYS[1], ARGV[4])
if not token then
  return err
end
return token
