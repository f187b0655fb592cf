// Package redact keeps the secrets of a lock store URL out of what
// turnstile says: errors, log lines, metric labels and help text.
//
// A URL's secrets are the password of its user information, also in the
// opaque form scheme:user:password@host and the scheme-less form
// //user:password@host, and the values of query parameters whose names
// look secret (password, sslpassword, token, secret, key, ...), and the
// secrets of a query value that is itself a URL (the stores of a
// fallback:// URL), percent-encoded or not. In the opaque form the user
// name is masked too, since it may be a password. A URL whose user
// information has no clear end (Ambiguous) has all that may be its
// password masked, up to the last '@'.
// URL masks
// them in a URL; Error masks every occurrence of them in an error's
// message, as a last line of defence for errors of drivers and parsers
// that repeat what they were given.
package redact

import (
	"slices"
	"strings"
)

// Mask is what stands in for a secret.
const Mask = "xxxxx"

// span is a secret's place in a raw URL: raw[start:end].
type span struct{ start, end int }

// parts finds the secrets of raw: where they are (for URL) and the
// strings to scrub (for Error), raw and percent-decoded.
func parts(raw string) ([]span, []string) {
	var spans []span
	var secrets []string
	addSecret := func(s string) { secrets = append(secrets, variants(s)...) }

	add := func(start, end int) {
		if start < end {
			spans = append(spans, span{start, end})
			addSecret(raw[start:end])
		}
	}

	rest, opaque := authority(raw)

	// The user information ends at the last '@' of the authority, as
	// url.Parse reads it; failing that, or when an '@' further on makes
	// that end unclear (Ambiguous), at the last '@' of all, since an
	// unescaped '/', '?' or '#' in a password ends the authority early.
	auth := raw[rest:]
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	at := strings.LastIndexByte(auth, '@')
	after := rest
	// An empty authority (scheme://?query) has no user information: an
	// '@' further on is in the query (a URL in a query value).
	greedy := auth != "" && (at < 0 || ambiguous(raw[rest:], opaque))
	if greedy {
		at = strings.LastIndexByte(raw[rest:], '@')
	}
	if at >= 0 {
		cred := raw[rest : rest+at]
		if opaque {
			// No URL form of turnstile is opaque, so which of
			// scheme:user:password@host, scheme:password@host and a
			// scheme-less user:password@host was meant is unclear: mask
			// all the user information.
			add(rest, rest+at)
		} else if c := strings.IndexByte(cred, ':'); c >= 0 {
			add(rest+c+1, rest+at)
		}
		if !greedy {
			after = rest + at + 1
		} // else the '@' may be part of a query parameter, looked at below
	}

	// Query (and fragment) parameters with secret names.
	for i := after; i < len(raw); i++ {
		switch raw[i] {
		case '?', '&', ';', '#':
		default:
			continue
		}
		end := i + 1 + strings.IndexAny(raw[i+1:], "&;#")
		if end == i {
			end = len(raw)
		}
		name, _, ok := strings.Cut(raw[i+1:end], "=")
		// A secret value, or one that is a URL, runs to the next
		// parameter: a '#' in it was meant as part of the secret or of
		// the inner URL's password, not as a fragment.
		toNext := end
		if j := strings.IndexAny(raw[end:], "&;"); j >= 0 {
			toNext += j
		} else {
			toNext = len(raw)
		}
		if ok && SecretParam(name) {
			add(i+1+len(name)+1, toNext)
			i = toNext - 1
		} else if ok {
			// A value that is itself a URL (the stores of a fallback://
			// URL) has its own secrets, masked where they stand.
			start := i + 1 + len(name) + 1
			dec, at := unescapeMap(raw[start:toNext])
			if !innerURL(dec) && innerURL(raw[start:toNext]) {
				// A '+' of the scheme (redis+sentinel:) decodes to a
				// space: look at the value as written.
				dec = raw[start:toNext]
				at = at[:0]
				for j := range len(dec) + 1 {
					at = append(at, j)
				}
			}
			if innerURL(dec) {
				inner, innerSecrets := parts(dec)
				for _, sp := range inner {
					add(start+at[sp.start], start+at[sp.end])
				}
				secrets = append(secrets, innerSecrets...)
				i = toNext - 1
			}
		}
	}
	// Secrets that overlap are masked as one.
	spans = merge(spans)
	for _, sp := range spans {
		addSecret(raw[sp.start:sp.end])
	}
	return spans, secrets
}

// innerURL reports whether the query value v may be a URL with secrets
// of its own: scheme://…, //… or scheme:…@….
func innerURL(v string) bool {
	return strings.Contains(v, "://") || strings.HasPrefix(v, "//") || (schemeEnd(v) > 0 && strings.Contains(v, "@"))
}

// unescapeMap decodes s as a query value ('+' is a space, %XX a byte;
// a '%' not followed by two hex digits stays as it is), and returns
// where each byte of the result came from: dec[j] from s[at[j]:], and
// at[len(dec)] = len(s).
func unescapeMap(s string) (dec string, at []int) {
	var b strings.Builder
	at = make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		at = append(at, i)
		switch {
		case s[i] == '+':
			b.WriteByte(' ')
			i++
		case s[i] == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 3
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), append(at, len(s))
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// merge sorts spans and joins those that overlap.
func merge(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.start < out[n-1].end {
			out[n-1].end = max(out[n-1].end, s.end)
			continue
		}
		out = append(out, s)
	}
	return out
}

// authority is where the authority of raw begins: after the scheme
// (if raw has one) and the "//" that opens an authority. opaque: raw has
// a scheme and no "//" (scheme:user:password@host).
func authority(raw string) (start int, opaque bool) {
	if i := schemeEnd(raw); i > 0 {
		start, opaque = i+1, true
	}
	if strings.HasPrefix(raw[start:], "//") {
		start += 2
		opaque = false
	}
	return start, opaque
}

// schemeEnd is the index of the ':' after raw's scheme, or -1.
func schemeEnd(raw string) int {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.':
			if i == 0 {
				return -1
			}
		case c == ':':
			if i == 0 {
				return -1
			}
			return i
		default:
			return -1
		}
	}
	return -1
}

// URL returns raw with its secrets replaced by Mask; the rest, the user
// name included, is kept as given. It never fails: input that is no URL
// at all is masked as far as it looks like one.
func URL(raw string) string {
	spans, _ := parts(raw)
	if len(spans) == 0 {
		return raw
	}
	var b strings.Builder
	last := 0
	for _, s := range spans {
		b.WriteString(raw[last:s.start])
		b.WriteString(Mask)
		last = s.end
	}
	b.WriteString(raw[last:])
	return b.String()
}

// Secrets returns the secrets of raw as they may appear in a message:
// as written, percent-decoded, and the pieces a parser may have cut a
// password into.
func Secrets(raw string) []string {
	_, s := parts(raw)
	return s
}
