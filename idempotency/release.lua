-- Drop the caller's claim, so that the request can run again at once.
--
-- KEYS[1] request key
-- ARGV[1] claim value ('c' .. owner)
--
-- Returns 1 if dropped, 0 if the claim was no longer the caller's.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
