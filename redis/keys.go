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
	if key[0] == '}' || key[0] == '\\' {
		key = `\` + key
	}
	lock := b.cfg.prefix + "{" + key + "}"
	return names{lock: lock, fence: lock + ":fence", channel: lock + ":released"}
}
