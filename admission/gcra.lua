-- Admits one request under a generic cell rate algorithm (GCRA) limit.
-- KEYS[1]  the key's theoretical arrival time (TAT), in µs on the server
--          clock, counted from Unix second 1,700,000,000 so that a Lua
--          number keeps sub-µs precision
-- ARGV[1]  emission interval: µs between admissions at the limit's rate
-- ARGV[2]  window: emission interval × burst
-- ARGV[3]  how many requests to admit at most (default 1)
-- Returns {n, 0} when n ≥ 1 requests are admitted, {0, µs until an
-- admission may succeed} when none is.
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1700000000) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
if tat < now then
  tat = now
end
local want = tonumber(ARGV[3] or '1') or 1
-- As many as fit: tat + n × interval − window ≤ now.
local n = math.floor((now + window - tat) / interval)
if n > want then
  n = want
end
if n < 1 then
  return {0, math.ceil(tat + interval - window - now)}
end
local next_tat = tat + n * interval
-- The key is worth keeping only until the TAT is in the past: from then
-- on a missing key means the same thing (a full burst).
redis.call('SET', KEYS[1], string.format('%.17g', next_tat), 'PX', math.ceil((next_tat - now) / 1000))
return {n, 0}
