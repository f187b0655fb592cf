-- Read, or remove by force, the lock of a lock kind with several holders
-- or a count: a semaphore, a read-write lock, a reentrant lock.
--
-- ARGV[1] the kind: 'set' (semaphore: KEYS[1] holders, a sorted set of
--         owner → expiry in ms), 'rw' (KEYS[1] the writer, a string
--         holding its owner; KEYS[2] readers, a sorted set as 'set'), or
--         'reentrant' (KEYS[1] a hash of owner → count, with field '' the
--         token)
-- ARGV[2] 'force' to remove the lock, anything else to read it
-- ARGV[3] grace (ms)   ARGV[4] release channel
-- After the kind's keys: the fence key, then (with 'force') the fence
-- package's guard key of the resource.
--
-- With 'force', when anyone holds the lock and T is the fence key's last
-- token: the fence key is raised to the floor room_up(T + 1), the guard
-- key, if it exists, to at least the floor, as force_release.lua does;
-- the kind's keys are deleted and the release notice sent. Prepended with
-- token.lua (room_up).
--
-- Returns T, the fence floor (room_up(T + 1) after a removal, else T),
-- then three strings per live holder: owner, token ('0' where the kind
-- keeps none per holder), ms left (-1: no expiry).

if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind, force = ARGV[1], ARGV[2] == 'force'
local nkeys = 1
if kind == 'rw' then
  nkeys = 2
end
local fence, guard = KEYS[nkeys + 1], KEYS[nkeys + 2]
local last = tonumber(redis.call('GET', fence) or '0') or 0
local out = {'', ''}

local function add(owner, token, left)
  out[#out + 1] = owner
  out[#out + 1] = token
  out[#out + 1] = tostring(left)
end

local function members(set)
  if redis.call('TYPE', set).ok ~= 'zset' then
    return
  end
  local r = redis.call('ZRANGEBYSCORE', set, '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #r, 2 do
    add(r[i], '0', string.format('%.0f', tonumber(r[i + 1]) - now))
  end
end

if kind == 'set' then
  members(KEYS[1])
elseif kind == 'rw' then
  if redis.call('TYPE', KEYS[1]).ok == 'string' then
    add((string.gsub(redis.call('GET', KEYS[1]), '\1$', '')), string.format('%.0f', last), redis.call('PTTL', KEYS[1]))
  end
  members(KEYS[2])
elseif kind == 'reentrant' then
  if redis.call('TYPE', KEYS[1]).ok == 'hash' then
    local token = redis.call('HGET', KEYS[1], '') or '0'
    local left = redis.call('PTTL', KEYS[1])
    for _, owner in ipairs(redis.call('HKEYS', KEYS[1])) do
      if owner ~= '' then
        add(owner, token, left)
      end
    end
  end
else
  return redis.error_reply('turnstile: unknown lock kind ' .. tostring(kind))
end

local floor = last
if force and #out > 2 then
  floor = room_up(last + 1)
  -- %.0f: Redis would turn a number into a string with %.14g and round it.
  redis.call('SET', fence, string.format('%.0f', floor), 'PX', ARGV[3])
  local g = redis.call('GET', guard)
  if g and (tonumber(g) or 0) < floor then
    redis.call('SET', guard, string.format('%.0f', floor))
  end
  for i = 1, nkeys do
    redis.call('DEL', KEYS[i])
  end
  if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
    redis.call('SPUBLISH', ARGV[4], '1')
  else
    redis.call('PUBLISH', ARGV[4], '1')
  end
end
out[1] = string.format('%.0f', last)
out[2] = string.format('%.0f', floor)
return out
