package redact

import (
	"net/url"
	"strings"
)

// secretWords are what the name of a query parameter that carries a
// secret contains.
var secretWords = []string{"pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "signature"}

// misspelt are the words whose misspellings (pasword, passowrd, scret,
// tokn) still name a secret, each with the most edits a misspelling of
// it may have: a misspelt secret parameter is still a secret, and a
// parser that refuses it as unknown must not have shown its value on
// the way.
var misspelt = []struct {
	word  string
	edits int
}{{"password", 2}, {"passwd", 1}, {"secret", 1}, {"token", 1}, {"credential", 2}, {"credentials", 2}}

// SecretParam reports whether a query parameter named name carries a
// secret: its name contains a word such as pass, secret, token or key,
// or is close to a misspelling of password, secret, token or
// credential. A file's path (password_file, key_file) is no secret.
func SecretParam(name string) bool {
	n, err := url.QueryUnescape(name)
	if err != nil {
		n = name
	}
	n = strings.ToLower(n)
	// A file's path (password_file, key_file) is no secret, and an error
	// about the file must be able to say which file.
	if strings.HasSuffix(n, "_file") {
		return false
	}
	for _, s := range secretWords {
		if strings.Contains(n, s) {
			return true
		}
	}
	return Misspelt(n)
}

// Misspelt reports whether a word of name (letters between other
// characters) is a misspelling of password, secret, token or
// credential: within a couple of letters added, dropped, changed or
// swapped.
func Misspelt(name string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r < 'a' || r > 'z' }) {
		for _, m := range misspelt {
			if d := len(w) - len(m.word); d <= m.edits && d >= -m.edits && edits(w, m.word) <= m.edits {
				return true
			}
		}
	}
	return false
}

// edits is the number of letters to add, drop, change or swap with
// their neighbour to make a of b (optimal string alignment distance).
func edits(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
