package redis

// names are the Redis keys of one lock. The lock key puts the whole lock
// key in a hash tag, and the fence key and release channel extend it, so
// all three hash to one Redis Cluster slot and a script may touch them all.
type names struct {
	lock, fence, channel string
}

func (b *Backend) names(key string) names {
	// A key that begins with '}' would close the tag at once; Redis treats
	// an empty tag as no tag and would hash each name differently. Such
	// keys, and keys beginning with the escape byte itself (so that the
	// mapping stays one-to-one), get a leading backslash.
	esc := ""
	if key[0] == '}' || key[0] == '\\' {
		esc = `\`
	}
	// One allocation for the three: the fence key extends the lock key,
	// and the channel follows it in the same string.
	p := b.cfg.prefix
	all := p + "{" + esc + key + "}:fence" + p + "{" + esc + key + "}:released"
	n := len(p) + len(esc) + len(key) + len("{}")
	return names{lock: all[:n], fence: all[:n+len(":fence")], channel: all[n+len(":fence"):]}
}
