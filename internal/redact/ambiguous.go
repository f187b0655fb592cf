package redact

import (
	"errors"
	"strings"
)

// ErrAmbiguous is the error for a URL whose user information has no
// clear end (Ambiguous). It names no part of the URL: which part is the
// password is just what is unclear.
var ErrAmbiguous = errors.New("the userinfo is ambiguous: percent-encode '@', '/', '?' and '#' in the password (as %40, %2F, %3F, %23), and an '@' after the host (as %40)")

// Ambiguous reports whether where raw's user information ends is
// unclear: an '@' follows the '/', '?' or '#' that ends the authority
// for url.Parse. A password with an unescaped '/', '?' or '#' is cut
// there, as in redis://alice:hunter2@corp/2024@127.0.0.1:26379, whose
// password may be "hunter2@corp/2024" but which url.Parse reads as the
// password "hunter2", the host "corp" and the path "/2024@127.0.0.1:26379":
// a parser would show the rest of the password as a host or a path, and
// dial it. Such a URL must be refused before it is used or shown.
//
// An '@' in the query after an empty authority is no such sign: it
// belongs to a URL in a query value (fallback://?primary=URL), which is
// checked on its own. Nor is one after an authority without a ':' (no
// password, as in postgres://u@h/db?application_name=me@x).
func Ambiguous(raw string) bool {
	start, opaque := authority(raw)
	return ambiguous(raw[start:], opaque)
}

// ambiguous is Ambiguous for rest, what follows the scheme and "//".
func ambiguous(rest string, opaque bool) bool {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		return false
	}
	last := strings.LastIndexByte(rest, '@')
	if last < end {
		return false
	}
	path, fragment := rest[end:], ""
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path, fragment = path[:i], path[i+1:]
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch {
	case strings.Contains(path, "@") || strings.Contains(fragment, "@"):
		return true
	case opaque:
		// scheme:user:password@host: all of it may be the password.
		return true
	case end == 0:
		return false
	}
	return strings.Contains(rest[:last], ":")
}
