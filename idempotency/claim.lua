-- Claim a request key, or report what holds it.
--
-- KEYS[1] request key
-- ARGV[1] claim value ('c' .. owner)   ARGV[2] claim ttl (ms)
--
-- Returns false (nil) if the key was free and is now claimed; otherwise
-- the key's value: 'c' .. owner of a running claim, or 'd' .. result.
-- Expired claims and results are gone from Redis, so a free key is one
-- whose earlier claim crashed or whose result outlived its retention.

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
return redis.call('GET', KEYS[1])
