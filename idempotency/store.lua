-- Replace the caller's claim by the request's result.
--
-- KEYS[1] request key
-- ARGV[1] claim value ('c' .. owner)   ARGV[2] 'd' .. result
-- ARGV[3] retention (ms)
--
-- Returns 1 if stored, 0 if the claim was lost (expired, and perhaps
-- claimed by another call since): then nothing is written.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
