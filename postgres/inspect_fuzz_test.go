package postgres

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSuccessor: the range List reads, [prefix, successor(prefix)), holds
// exactly the strings that start with prefix, in the byte order the
// C-collation index keeps (code point order, for UTF-8), and the bound is
// valid UTF-8, as PostgreSQL's text must be.
func FuzzSuccessor(f *testing.F) {
	for _, s := range [][2]string{
		{"", "a"}, {"ls/", "ls/a"}, {"ls/", "ls0"}, {"ls", "ls/a"}, {"a", "b"},
		{"ü", "üx"}, {"\U0010FFFF", "\U0010FFFFa"}, {"a\U0010FFFF", "b"}, {"\uD7FF", "\uE000"}, {"\x7f", "\u0080"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, prefix, s string) {
		if !utf8.ValidString(prefix) || !utf8.ValidString(s) {
			return // keys in PostgreSQL are valid UTF-8
		}
		end, ok := successor(prefix)
		if ok && !utf8.ValidString(end) {
			t.Fatalf("successor(%q) = %q, not valid UTF-8", prefix, end)
		}
		if ok && end <= prefix {
			t.Fatalf("successor(%q) = %q, not above it", prefix, end)
		}
		in := s >= prefix && (!ok || s < end)
		if in != strings.HasPrefix(s, prefix) {
			t.Fatalf("%q in [%q, %q) (bounded: %v) = %v, but starts with it = %v", s, prefix, end, ok, in, !in)
		}
	})
}
