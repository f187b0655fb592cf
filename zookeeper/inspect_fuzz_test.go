package zookeeper

import "testing"

// FuzzUnescape: unescape, which List uses to read keys back from the names
// of their directories, undoes escape for every key, and accepts only the
// names escape produces: what it decodes escapes back to the same name.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "a", "ls/a", "ünï", "%", "%2", "%2F", "%2f", "%41", "a%2Fb", "%%", "100%", "x y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k, ok := unescape(escape(s)); !ok || k != s {
			t.Fatalf("unescape(escape(%q)) = %q, %v", s, k, ok)
		}
		k, ok := unescape(s)
		if ok && escape(k) != s {
			t.Fatalf("unescape(%q) = %q, which escapes to %q", s, k, escape(k))
		}
		if !ok && k != "" {
			t.Fatalf("unescape(%q) refused the name but returned %q", s, k)
		}
	})
}
