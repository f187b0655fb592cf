package mysql

import (
	"bytes"
	"testing"
)

// FuzzSuccessor: the range List reads, [prefix, successor(prefix)), holds
// exactly the byte strings that start with prefix, in the byte order of
// the table's VARBINARY primary key.
func FuzzSuccessor(f *testing.F) {
	for _, s := range [][2]string{
		{"", "a"}, {"ls/", "ls/a"}, {"ls/", "ls0"}, {"ls", "ls/a"}, {"a", "b"},
		{"\xff", "\xff\x00"}, {"a\xff", "b"}, {"a\xff\xff", "a\xff\xff\xff"}, {"ü", "üx"},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, prefix, s []byte) {
		end, ok := successor(prefix)
		if ok && bytes.Compare(end, prefix) <= 0 {
			t.Fatalf("successor(%q) = %q, not above it", prefix, end)
		}
		in := bytes.Compare(s, prefix) >= 0 && (!ok || bytes.Compare(s, end) < 0)
		if in != bytes.HasPrefix(s, prefix) {
			t.Fatalf("%q in [%q, %q) (bounded: %v) = %v, but starts with it = %v", s, prefix, end, ok, in, !in)
		}
	})
}
