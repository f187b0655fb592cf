package clusterslot

import "testing"

// TestOf checks Of against the CRC16 check value of the Redis Cluster
// specification and slots Redis Cluster reports (CLUSTER KEYSLOT), and
// the hash tag rules.
func TestOf(t *testing.T) {
	if got := CRC16("123456789"); got != 0x31C3 {
		t.Errorf("CRC16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]uint16{
		"foo":            12182,
		"bar":            5061,
		"hello":          866,
		"somekey":        11058,
		"123456789":      12739,
		"foo{hash_tag}":  2515,
		"hash_tag":       2515,
		"{foo}:anything": 12182, // the tag alone is hashed
		"x{foo}y{bar}":   12182, // the first tag counts
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"{inventory:1}:guard", "inventory:1"},
		{"{lock:{w1}}:guard", "lock:{w1"}, // up to the first '}'
		{"{}foo", "{}foo"},
	} {
		if Of(tc.a) != Of(tc.b) {
			t.Errorf("Of(%q) != Of(%q)", tc.a, tc.b)
		}
	}
	// An empty tag is no tag: the whole key is hashed.
	if Of("{}foo") != CRC16("{}foo")%Count {
		t.Error(`Of("{}foo") does not hash the whole key`)
	}
	// An unclosed tag is no tag either.
	if Of("{foo") != CRC16("{foo")%Count {
		t.Error(`Of("{foo") does not hash the whole key`)
	}
}
