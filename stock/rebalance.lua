-- Sharded rebalance. KEYS: the shards, in index order (at most 64, one
-- hash slot). Spreads the units left over the shards evenly again, the
-- remainder one each on the first shards, and returns the total. Numbers
-- go back to Redis through '%d' so that no large value is written in
-- exponent notation.
local count = #KEYS
local total = 0
for i = 1, count do
  local v = tonumber(redis.call('GET', KEYS[i]) or '0')
  if v == nil then
    return redis.error_reply('stock shard ' .. KEYS[i] .. ' does not hold an integer')
  end
  if v > 0 then
    total = total + v
  end
end
local each = math.floor(total / count)
local extra = total - each * count
for i = 1, count do
  local v = each
  if i <= extra then
    v = v + 1
  end
  redis.call('SET', KEYS[i], string.format('%d', v))
end
return total
