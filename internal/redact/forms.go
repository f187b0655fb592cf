package redact

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// variants are the forms in which the secret s may show in a message:
// those of forms, and, for a secret that url.Parse may have cut, those
// of its pieces.
func variants(s string) []string {
	out := forms(s)
	// A password with an unescaped '/', '?' or '#' is cut there by
	// url.Parse, whose error (or a parser's) may then show a piece,
	// decoded or not: as a host, a port, a path, a query parameter's
	// name or value.
	if strings.ContainsAny(s, "/?#") {
		for _, d := range decodings(s) {
			for _, p := range strings.FieldsFunc(d, func(r rune) bool { return strings.ContainsRune(pieceEnds, r) }) {
				out = append(out, forms(p)...)
			}
		}
	}
	return out
}

// forms are s as written, percent-decoded, encoded again as
// url.URL.String (as user information, a path or a fragment) and
// url.Values encode it, and quoted as %q quotes it.
func forms(s string) []string {
	var out []string
	for _, d := range decodings(s) {
		out = append(out, d, url.QueryEscape(d), url.PathEscape(d),
			strings.TrimPrefix(url.UserPassword("", d).String(), ":"),
			(&url.URL{Path: d}).EscapedPath(), (&url.URL{Fragment: d}).EscapedFragment())
		// As url.Parse's errors quote a URL.
		if q := strconv.Quote(d); q[1:len(q)-1] != d {
			out = append(out, q[1:len(q)-1])
		}
	}
	return out
}

// decodings are s and the ways it may have been percent-decoded.
func decodings(s string) []string {
	out := []string{s}
	if d, err := url.PathUnescape(s); err == nil && d != s {
		out = append(out, d)
	}
	if d, err := url.QueryUnescape(s); err == nil && !slices.Contains(out, d) {
		out = append(out, d)
	}
	// url.Parse decodes each part of a URL on its own: a bad escape in
	// one part leaves the others decoded.
	if d := lenientUnescape(s); !slices.Contains(out, d) {
		out = append(out, d)
	}
	return out
}

// pieceEnds are where url.Parse and the parsers after it may cut a
// password that holds an unescaped '/', '?' or '#': the ends of the
// parts of a URL, of a host's port and of query parameters.
const pieceEnds = "/?#@:&;= "

// lenientUnescape decodes the %XX escapes of s and leaves a '%' that
// starts none as it is.
func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
