-- Extend a claim if, and only if, it is still the caller's.
--
-- KEYS[1] request key
-- ARGV[1] claim value ('c' .. owner)   ARGV[2] claim ttl (ms)
--
-- Returns 1 if renewed, 0 if the claim is gone or someone else's.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
