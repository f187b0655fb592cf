package fence

import "testing"

// TestKeySlot checks keySlot against slots Redis Cluster reports
// (CLUSTER KEYSLOT), and the hash tag rules.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"foo":            12182,
		"bar":            5061,
		"hello":          866,
		"123456789":      12739,
		"{foo}:anything": 12182, // the tag alone is hashed
		"x{foo}y{bar}":   12182, // the first tag counts
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"{inventory:1}:guard", "inventory:1"},
		{"{lock:{w1}}:guard", "lock:{w1"}, // up to the first '}'
	} {
		if keySlot(tc.a) != keySlot(tc.b) {
			t.Errorf("keySlot(%q) != keySlot(%q)", tc.a, tc.b)
		}
	}
	// An empty tag is no tag: the whole key is hashed.
	if keySlot("{}foo") == keySlot("") {
		t.Error(`keySlot("{}foo") hashes the empty tag`)
	}
}
