package redis

import (
	"strings"
	"testing"
)

// FuzzLockKeyOf: List's reading of the Redis keys SCAN returns is the
// inverse of the names the backend gives locks, with and without a
// prefix, and accepts no other key; the reply parser never panics.
func FuzzLockKeyOf(f *testing.F) {
	for _, k := range []string{"lock:1", "}", `\`, `\}`, "{}", "a}b", "}{", "{w1}", "x*[1]", "with\nnewline"} {
		f.Add("", k, "{"+k+"}")
		f.Add("app:", k, "app:{"+k+"}:fence")
	}
	f.Fuzz(func(t *testing.T, prefix, key, rk string) {
		if strings.ContainsAny(prefix, "{}") {
			return // WithPrefix refuses it
		}
		b := &Backend{cfg: config{prefix: prefix}}
		if key != "" {
			if got, ok := b.lockKeyOf(b.names(key).lock); !ok || got != key {
				t.Errorf("prefix %q: lockKeyOf(names(%q).lock) = %q, %v", prefix, key, got, ok)
			}
			if _, ok := b.lockKeyOf(b.names(key).fence); ok {
				t.Errorf("prefix %q: the fence key of %q taken for a lock key", prefix, key)
			}
		}
		if k, ok := b.lockKeyOf(rk); ok && b.names(k).lock != rk {
			t.Errorf("prefix %q: lockKeyOf(%q) = %q, whose lock key is %q", prefix, rk, k, b.names(k).lock)
		}
		_, _ = parseState(key, []string{rk, prefix, key, rk}, true)
	})
}
