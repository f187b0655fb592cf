-- Remove a lock whoever holds it (an operator's forced unlock), after
-- raising its fences, in one atomic step. Prepended with token.lua (ROOM,
-- room_up).
--
-- KEYS[1] lock key   KEYS[2] fence key
-- KEYS[3] the fence package's guard key of the same resource (P{K}:guard)
-- ARGV[1] grace (ms)   ARGV[2] release channel
--
-- When the lock is held, with T the fence key's last token: the holder
-- may be a lease its Client was handed without the store, with a token
-- up to T - T % ROOM + ROOM - 1 (token.lua). The floor is the multiple
-- of ROOM above all of those, room_up(T + 1). The fence key is raised to
-- it, so that the next token is at least ROOM above it; the guard key, if
-- it exists, is raised to at least the floor, so that fenced storage
-- refuses every token of the removed run even where it accepts a token
-- equal to the last one, while the next holder's token passes it either
-- way. Then the lock goes and the release notice is sent, as on a release.
--
-- Returns four strings: the removed owner ('' if the lock was free: then
-- nothing changes), its PTTL in ms, T, and the fence floor (every later
-- token is greater; T when nothing changed).

if redis.replicate_commands then
  redis.replicate_commands()
end

local owner = ''
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  -- Without the byte that marks a lock waited for (acquire.lua).
  owner = string.gsub(redis.call('GET', KEYS[1]), '\1$', '')
end
local pttl = redis.call('PTTL', KEYS[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if owner == '' then
  return {'', tostring(pttl), string.format('%.0f', last), string.format('%.0f', last)}
end

local floor = room_up(last + 1)
-- %.0f: Redis would turn a number into a string with %.14g and round it.
redis.call('SET', KEYS[2], string.format('%.0f', floor), 'PX', ARGV[1])
local guard = redis.call('GET', KEYS[3])
if guard and (tonumber(guard) or 0) < floor then
  redis.call('SET', KEYS[3], string.format('%.0f', floor))
end
redis.call('DEL', KEYS[1])

local channel = ARGV[2]
if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
  redis.call('SPUBLISH', channel, '1')
else
  redis.call('PUBLISH', channel, '1')
end
return {owner, tostring(pttl), string.format('%.0f', last), string.format('%.0f', floor)}
