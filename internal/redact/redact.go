// Package redact keeps the secrets of a lock store URL out of what
// turnstile says: errors, log lines, metric labels and help text.
//
// A URL's secrets are the password of its user information, also in the
// opaque form scheme:user:password@host and the scheme-less form
// //user:password@host, and the values of query parameters whose names
// look secret (password, sslpassword, token, secret, key, ...), and the
// secrets of a query value that is itself a URL (the stores of a
// fallback:// URL), percent-encoded or not. In the opaque form the user
// name is masked too, since it may be a password.
// URL masks
// them in a URL; Error masks every occurrence of them in an error's
// message, as a last line of defence for errors of drivers and parsers
// that repeat what they were given.
package redact

import (
	"net/url"
	"slices"
	"strings"
)

// Mask is what stands in for a secret.
const Mask = "xxxxx"

// minScrub is the shortest secret that String and Error remove from free
// text: a string of one or two bytes would match all over an ordinary
// message and hide nothing an attacker could not guess. URL masks
// secrets of every length, since it knows where they are.
const minScrub = 3

// secretParam reports whether a query parameter named name carries a
// secret.
func secretParam(name string) bool {
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
	for _, s := range []string{"pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "signature"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// span is a secret's place in a raw URL: raw[start:end].
type span struct{ start, end int }

// parts finds the secrets of raw: where they are (for URL) and the
// strings to scrub (for Error), raw and percent-decoded.
func parts(raw string) ([]span, []string) {
	var spans []span
	var secrets []string
	addSecret := func(s string) {
		// Decoded, and encoded again as url.URL.String and url.Values
		// encode it.
		plain := []string{s}
		if d, err := url.PathUnescape(s); err == nil && d != s {
			plain = append(plain, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			plain = append(plain, d)
		}
		for _, d := range plain {
			secrets = append(secrets, d, url.QueryEscape(d), url.PathEscape(d),
				strings.TrimPrefix(url.UserPassword("", d).String(), ":"))
		}
		// A password with an unescaped '/', '?' or '#' is cut there by
		// url.Parse, whose error (or a parser's) may then show a piece.
		if strings.ContainsAny(s, "/?#") {
			secrets = append(secrets, strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '?' || r == '#' })...)
		}
	}

	add := func(start, end int) {
		if start < end {
			spans = append(spans, span{start, end})
			addSecret(raw[start:end])
		}
	}

	// The scheme, if raw has one, and the "//" of an authority.
	rest := 0
	opaque := false
	if i := schemeEnd(raw); i > 0 {
		rest = i + 1
		opaque = true
	}
	if strings.HasPrefix(raw[rest:], "//") {
		rest += 2
		opaque = false
	}

	// The user information ends at the last '@' of the authority, as
	// url.Parse reads it; failing that, at the last '@' of all, since an
	// unescaped '/', '?' or '#' in a password ends the authority early.
	auth := raw[rest:]
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	at := strings.LastIndexByte(auth, '@')
	after := rest
	// An empty authority (scheme://?query) has no user information: an
	// '@' further on is in the query (a URL in a query value).
	fallback := at < 0 && auth != ""
	if fallback {
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
		if !fallback {
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
		if ok && secretParam(name) {
			// A secret value runs to the next parameter: a '#' in it was
			// meant as part of the secret, not as a fragment.
			if j := strings.IndexAny(raw[end:], "&;"); j >= 0 {
				end += j
			} else {
				end = len(raw)
			}
			add(i+1+len(name)+1, end)
			i = end - 1
		} else if ok {
			// A value that is itself a URL (the stores of a fallback://
			// URL) has its own secrets, masked where they stand.
			start := i + 1 + len(name) + 1
			dec, at := unescapeMap(raw[start:end])
			if strings.Contains(dec, "://") {
				inner, innerSecrets := parts(dec)
				for _, sp := range inner {
					add(start+at[sp.start], start+at[sp.end])
				}
				secrets = append(secrets, innerSecrets...)
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

// String returns s with every occurrence of each secret replaced by
// Mask, longest secret first.
func String(s string, secrets ...string) string {
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range secrets {
		if len(sec) >= minScrub && sec != Mask {
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
}

// Error returns err with the secrets of the URL raw masked in its
// message. It returns err itself when its message holds no secret, and
// nil for nil.
//
// errors.Is and errors.As see through the result to the errors err wraps,
// each masked the same way: an error whose own message holds a secret is
// seen only as a masked copy, which errors.As cannot match by type, so
// that no way round leads back to the secret. errors.Unwrap, which knows
// only single wrapping, returns nil for a masked error.
func Error(err error, raw string) error {
	return scrub(err, Secrets(raw))
}

func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := String(msg, secrets...)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err, secrets: secrets}
}

// scrubbed is an error whose message had secrets masked.
type scrubbed struct {
	msg     string
	err     error
	secrets []string
}

func (e *scrubbed) Error() string { return e.msg }

// Unwrap returns the errors e's original wraps, masked.
func (e *scrubbed) Unwrap() []error {
	var inner []error
	switch u := e.err.(type) {
	case interface{ Unwrap() []error }:
		inner = u.Unwrap()
	case interface{ Unwrap() error }:
		inner = []error{u.Unwrap()}
	}
	out := make([]error, 0, len(inner))
	for _, w := range inner {
		if w != nil {
			out = append(out, scrub(w, e.secrets))
		}
	}
	return out
}
