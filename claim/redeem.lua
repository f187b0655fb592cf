-- Redeems coupon KEYS[1] (a hash) for redeemer ARGV[1], in one step.
-- Fields: issued (set by Issue), by and at (set here; at in microseconds
-- of the server's clock). Returns {0} for an unknown code, {1, by, at} for
-- a coupon already used (by this redeemer or another), {2, by, at} for
-- this redemption.
local got = redis.call('HMGET', KEYS[1], 'issued', 'by', 'at')
if not got[1] then
  return {0}
end
if got[2] then
  return {1, got[2], got[3]}
end
local t = redis.call('TIME')
local at = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('HSET', KEYS[1], 'by', ARGV[1], 'at', at)
return {2, ARGV[1], at}
