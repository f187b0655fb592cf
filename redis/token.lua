-- The fencing token every lock kind issues (prepended to the scripts that
-- grant a lock): a hybrid logical clock, greater than the key's last token
-- while its fence key exists, and the server time in microseconds, which
-- has moved past every earlier token, once the fence key is gone
-- (eviction, restart). Returns the token, or nil and an error reply.
local function next_token(now, fence_key, lock_key)
  local token = now
  local last = tonumber(redis.call('GET', fence_key) or '0') or 0
  if last >= token then
    token = last + 1
  end
  -- Lua numbers are doubles: integers are exact only below 2^53.
  if token >= 9007199254740992 then
    return nil, redis.error_reply('turnstile: fencing token of ' .. lock_key .. ' out of range')
  end
  return token
end

