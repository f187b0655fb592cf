-- Raise package fence's guard key of a resource to at least a floor, if
-- the key exists: a Redlock's forced release, on a node whose own fence
-- floor was below the Redlock's (see Backend.RaiseGuard).
--
-- KEYS[1] guard key   ARGV[1] the floor: decimal, below 2^53
--
-- Returns 1 if it raised the key, 0 if the key is missing or at least the
-- floor already.

local g = redis.call('GET', KEYS[1])
if g and (tonumber(g) or 0) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
