-- Send a key's release notice without releasing anything: a client that
-- released quietly, for a waiter of its own that then did not take the
-- lock, tells the other waiters after all.
--
-- KEYS[1] lock key (routes the call to the node of the key's slot)
-- ARGV[1] release channel

if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
  redis.call('SPUBLISH', ARGV[1], '1')
else
  redis.call('PUBLISH', ARGV[1], '1')
end
return 1
