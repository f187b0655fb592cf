package redis

import "github.com/turnstilelock/turnstile/internal/rediskeys"

// names are the Redis keys of one lock. The lock key puts the whole lock
// key in a hash tag, and the fence key and release channel extend it, so
// all three hash to one Redis Cluster slot and a script may touch them all.
// Every name, and every suffix a lock kind adds (kindKey), comes from
// package rediskeys, whose one list of suffixes package fence refuses as
// data keys.
type names struct {
	lock, fence, channel string
}

func (b *Backend) names(key string) names {
	// A key that begins with '}' would close the tag at once; Redis treats
	// an empty tag as no tag and would hash each name differently. Such
	// keys, and keys beginning with the escape byte itself (so that the
	// mapping stays one-to-one), get a leading backslash (rediskeys.Tag).
	esc := rediskeys.Escape(key)
	fence, released := rediskeys.Fence.String(), rediskeys.Released.String()
	// One allocation for the three: the fence key extends the lock key,
	// and the channel follows it in the same string.
	p := b.cfg.prefix
	all := p + "{" + esc + key + "}" + fence + p + "{" + esc + key + "}" + released
	n := len(p) + len(esc) + len(key) + len("{}")
	return names{lock: all[:n], fence: all[:n+len(fence)], channel: all[n+len(fence):]}
}

// kindKey is the Redis key a lock kind keeps its state of the lock in:
// the lock key with a suffix of its own, so it shares the lock's hash
// slot and fence.
func (n names) kindKey(s rediskeys.Suffix) string { return n.lock + s.String() }

// KeyPrefix returns the prefix of every key and channel the backend names
// (WithPrefix): package fence's WithKeysOf names a guard's keys with it.
func (b *Backend) KeyPrefix() string { return b.cfg.prefix }

// GuardKey returns the key of package fence's guard of resource key, as
// a guard made WithKeysOf(b) names it: P{K}:guard. A forced release
// raises it; it lies under the prefix, where the backend's ACL user may
// reach it, and no other prefix's forced release touches it.
func (b *Backend) GuardKey(key string) string {
	return rediskeys.Key(b.cfg.prefix, key, rediskeys.Guard)
}
