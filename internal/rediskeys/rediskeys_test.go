package rediskeys

import (
	"strings"
	"testing"
)

// TestKey: the names of the redis backend's documentation, escapes
// included.
func TestKey(t *testing.T) {
	for _, tc := range []struct {
		prefix, key string
		s           Suffix
		want        string
	}{
		{"", "inv", Lock, "{inv}"},
		{"", "inv", Fence, "{inv}:fence"},
		{"app:", "inv", Guard, "app:{inv}:guard"},
		{"app:", "}x", Writer, `app:{\}x}:writer`},
		{"", `\x`, SemaphorePermits, `{\\x}:semaphore:permits`},
		{"", "a{b}c", QueueSeq, "{a{b}c}:queue:seq"},
	} {
		if got := Key(tc.prefix, tc.key, tc.s); got != tc.want {
			t.Errorf("Key(%q, %q, %q) = %q, want %q", tc.prefix, tc.key, tc.s, got, tc.want)
		}
	}
}

// TestTaken: every name of a lock's or guard's key, under any prefix and
// for any key, is taken, including names that are another resource's
// keys; names beside them are not.
func TestTaken(t *testing.T) {
	for _, name := range []string{
		"{inv}", "{inv}:fence", "{inv}:guard", "{inv}:released", "{x1}:started",
		"{inv}:writer", "{inv}:readers", "{inv}:writers", "{inv}:reentrant",
		"{inv}:semaphore", "{inv}:semaphore:permits", "{inv}:queue", "{inv}:queue:alive", "{inv}:queue:seq",
		"other:{inv}:writer", "app:{inv}:guard",
		"{inv}:stock}:fence", // the fence key of the lock on "inv}:stock"
		`{\}x}:fence`, `{\\x}`, "a{b}c{d}:queue",
	} {
		if !Taken(name) {
			t.Errorf("Taken(%q) = false, want true", name)
		}
	}
	for _, name := range []string{
		"", "inv", "{inv}:stock", "{inv}:writer:old", "{inv}:fences", "{}:fence", "{}x}:fence",
		`{\x}:fence`, "a}b{c}:fence", "{inv:fence", "inv}:fence", "{inv}:queue:alive2",
	} {
		if Taken(name) {
			t.Errorf("Taken(%q) = true, want false", name)
		}
	}
	if n := len(Reserved()); n != 14 {
		t.Errorf("%d reserved suffixes, want 14", n)
	}
}

// FuzzTaken: every name Key gives is taken, whatever the prefix (without
// braces, as the redis backend requires) and the key; Taken never panics.
func FuzzTaken(f *testing.F) {
	f.Add("app:", "inv", 0)
	f.Add("", "}x", 3)
	f.Add("", `\`, 9)
	f.Add("p", "a{b}:fence", 13)
	f.Fuzz(func(t *testing.T, prefix, key string, i int) {
		_ = Taken(prefix + key)
		if key == "" || strings.ContainsAny(prefix, "{}") {
			return
		}
		s := reserved[uint(i)%uint(len(reserved))]
		if name := Key(prefix, key, s); !Taken(name) {
			t.Fatalf("Taken(%q) = false for Key(%q, %q, %q)", name, prefix, key, s)
		}
	})
}
