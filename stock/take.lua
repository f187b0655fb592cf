-- Sharded take. KEYS: the shards, in index order (at most 64, one hash
-- slot). ARGV[1]: units to take (1 .. 2^53). ARGV[2]: the shard to start
-- at, chosen at random by the caller (a script must not draw randomness).
--
-- Takes the units from the first shard, counting on from the start shard,
-- that holds enough, and returns its index (0-based). When no shard holds
-- enough but all of them together do, takes them from the shards in the
-- same order and returns the first shard drawn from. Returns -1, touching
-- nothing, when the shards together hold fewer units than asked.
local n = tonumber(ARGV[1])
local start = tonumber(ARGV[2])
local count = #KEYS
local have = {}
local total = 0
for i = 0, count - 1 do
  local idx = (start + i) % count
  local v = tonumber(redis.call('GET', KEYS[idx + 1]) or '0')
  if v == nil then
    return redis.error_reply('stock shard ' .. KEYS[idx + 1] .. ' does not hold an integer')
  end
  if v >= n then
    redis.call('DECRBY', KEYS[idx + 1], ARGV[1])
    return idx
  end
  have[i + 1] = v
  if v > 0 then
    total = total + v
  end
end
if total < n then
  return -1
end
local need = n
local first = -1
for i = 0, count - 1 do
  local v = have[i + 1]
  if v > 0 then
    local idx = (start + i) % count
    local take = math.min(v, need)
    redis.call('DECRBY', KEYS[idx + 1], string.format('%d', take))
    if first < 0 then
      first = idx
    end
    need = need - take
    if need == 0 then
      return first
    end
  end
end
return first
