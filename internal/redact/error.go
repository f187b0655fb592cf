package redact

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// minScrub is the shortest secret that String and Error remove from free
// text: a string of one or two bytes would match all over an ordinary
// message and hide nothing an attacker could not guess. URL masks
// secrets of every length, since it knows where they are.
const minScrub = 3

// minAnywhere is the shortest secret that String and Error remove
// wherever it shows. A shorter one (a short password, a piece of one
// that url.Parse cut) is removed only where it stands as a word of its
// own: inside a longer word ("ile" in "turnstile") it is more likely a
// coincidence than the secret, and removing it there would garble
// turnstile's own words.
const minAnywhere = 6

// String returns s with every occurrence of each secret replaced by
// Mask, longest secret first; a secret shorter than minAnywhere only
// where it stands as a word of its own.
func String(s string, secrets ...string) string {
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range secrets {
		switch {
		case len(sec) < minScrub || sec == Mask:
		case len(sec) < minAnywhere:
			s = replaceWords(s, sec)
		default:
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
}

// replaceWords replaces sec with Mask in s where it is not part of a
// longer word: not preceded nor followed by a letter or digit.
func replaceWords(s, sec string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, sec)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(sec)
		if (alnum(sec[0]) && !wordStart(s, i)) || (end < len(s) && alnum(s[end]) && alnum(sec[len(sec)-1])) {
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(Mask)
		s = s[end:]
	}
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }

// wordStart reports whether a word may start at s[i]: at the start, after
// a character that is no letter or digit, or after an escape that ends
// in one (%2F, \n, \x1f, \u00e9), as a URL or %q writes the character
// that ends a piece of a password.
func wordStart(s string, i int) bool {
	switch {
	case i == 0 || !alnum(s[i-1]):
		return true
	case i >= 3 && s[i-3] == '%' && ishex(s[i-2]) && ishex(s[i-1]):
		return true
	case i >= 2 && s[i-2] == '\\':
		return true
	case i >= 4 && s[i-4] == '\\' && s[i-3] == 'x':
		return true
	case i >= 6 && s[i-6] == '\\' && s[i-5] == 'u':
		return true
	}
	return false
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
//
// Errors in err's tree that hold secrets of their own (Holder) have
// those masked too, wherever in the message they show: a parser's error
// that names a parameter but not its value, when the URL repeated around
// it shows the value.
func Error(err error, raw string) error {
	return scrub(err, append(Secrets(raw), held(err)...))
}

// Holder is an error that knows query parameters whose values its own
// message leaves out but that text around it may show, such as an
// unknown parameter (a misspelt password=), which the URL an error
// repeats holds: Error masks "name=value" in the whole message, in the
// forms a URL writes it (the value alone may be a word of any message,
// such as "on"), and hides the Holder from errors.As behind a masked
// copy.
type Holder interface {
	error
	HeldParams() url.Values
}

// held collects the secrets of the Holders in err's tree.
func held(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		var found []string
		switch h := e.(type) {
		case *scrubbed:
			// What it masked, in every form already: its Holders are
			// hidden behind it.
			found = h.secrets
		case Holder:
			for name, vals := range h.HeldParams() {
				for _, v := range vals {
					for _, f := range forms(v) {
						found = append(found, name+"="+f)
					}
				}
			}
		}
		// An error of an inner URL (fallback://?primary=URL) may be
		// wrapped in one that shows the outer URL, where the inner one
		// is a query value, percent-encoded once more.
		for _, f := range found {
			out = append(out, f)
			if q := url.QueryEscape(f); q != f {
				out = append(out, q)
			}
		}
		if _, ok := e.(*scrubbed); ok {
			return // what it wraps, it masked with the same secrets
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				if w != nil {
					walk(w)
				}
			}
		case interface{ Unwrap() error }:
			if w := u.Unwrap(); w != nil {
				walk(w)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := String(msg, secrets...)
	if clean == msg && !holds(err) {
		return err
	}
	return &scrubbed{msg: clean, err: err, secrets: secrets}
}

// holds reports whether a Holder is in err's tree: err is then masked
// even when its message shows nothing, so that errors.As cannot find the
// Holder and ask it for its secrets.
func holds(err error) bool {
	if _, ok := err.(Holder); ok {
		return true
	}
	switch u := err.(type) {
	case *scrubbed:
		return false // it hides its own
	case interface{ Unwrap() []error }:
		for _, w := range u.Unwrap() {
			if w != nil && holds(w) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		if w := u.Unwrap(); w != nil {
			return holds(w)
		}
	}
	return false
}

// scrubbed is an error whose message had secrets masked.
type scrubbed struct {
	msg     string
	err     error
	secrets []string
}

func (e *scrubbed) Error() string { return e.msg }

// Is reports whether e is a masked copy of target: a sentinel error
// whose message happened to hold a secret's text still matches.
func (e *scrubbed) Is(target error) bool {
	// As errors.Is compares: == panics on two values of one type that
	// is not comparable.
	return target != nil && reflect.TypeOf(target).Comparable() && e.err == target
}

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
