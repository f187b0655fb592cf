// Package redacttest builds URLs that carry a secret in every place a
// lock store URL can hold one, for tests that check the secret never
// shows in what turnstile says.
package redacttest

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// alphabet makes secrets: upper-case letters that no message of
// turnstile or of its drivers spells six of in a row.
const alphabet = "QJZVWK"

// Separators are what a secret may have between its two halves: nothing,
// and the characters that end or split a part of a URL when a user
// forgets to percent-encode them.
var Separators = []string{"", "/", "#", "?", "@", ":", "%", "%2F", "%40", " ", "!", "$", "'", "\n"}

// Secret builds a secret from two fuzz inputs and separators: runs of
// letters of alphabet, one more than there are separators, each at least
// six long, so that no run nor the whole can be part of an ordinary
// message, with the separators between them. It returns the secret and
// the strings that must never appear: the secret and each run.
func Secret(a, b []byte, seps ...string) (string, []string) {
	var s strings.Builder
	never := []string{""} // the whole, below
	for i := range len(seps) + 1 {
		src := a
		if i%2 == 1 {
			src = b
		}
		// Each run from its input framed by its index, so that runs
		// differ even when the inputs are short or the same.
		run := letters(append(append([]byte{byte(i)}, src...), byte(i)))
		if i > 0 {
			s.WriteString(seps[i-1])
		}
		s.WriteString(run)
		never = append(never, run)
	}
	never[0] = s.String()
	return never[0], never
}

// Seps are the separators of a secret that the fuzz inputs choose: two
// from one byte (every pair of Separators, such as '@' then '/', for
// some value) and a third from the length of a, so that a secret has
// several.
func Seps(idx uint8, a []byte) []string {
	n := len(Separators)
	return []string{Separators[int(idx)%n], Separators[int(idx)/n%n], Separators[len(a)%n]}
}

// SepsIndex is the byte that makes Seps choose Separators[i] then
// Separators[j], for seeds.
func SepsIndex(i, j int) uint8 { return uint8(i + j*len(Separators)) }

func letters(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		if s.Len() == 24 {
			break
		}
		s.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	for s.Len() < 6 {
		s.WriteByte(alphabet[s.Len()%len(alphabet)])
	}
	return s.String()
}

// URLs returns URLs of scheme for the server at host (host:port or a
// list) with secret in every place: the password of the user
// information (also with no user, in the opaque form scheme:user:pw@host
// and in the scheme-less form //user:pw@host), followed by a path, a
// query or a fragment; and the value of the query parameters password,
// sslpassword and token, percent-encoded as a URL needs and as given.
func URLs(scheme, host, secret string) []string {
	q := url.QueryEscape(secret)
	return []string{
		scheme + "://user:" + secret + "@" + host,
		scheme + "://:" + secret + "@" + host,
		scheme + "://user:" + secret + "@" + host + "/0",
		scheme + "://user:" + secret + "@" + host + "/db?x=1",
		scheme + "://user:" + secret + "@" + host + "#frag",
		scheme + "://user:" + url.PathEscape(secret) + "@" + host + "/db",
		scheme + ":user:" + secret + "@" + host,
		scheme + ":" + secret + "@" + host,
		"//user:" + secret + "@" + host,
		"//:" + secret + "@" + host,
		"user:" + secret + "@" + host,
		scheme + "://" + host + "/db?password=" + q,
		scheme + "://" + host + "/db?sslpassword=" + q,
		scheme + "://" + host + "/db?sslmode=disable&password=" + q + "&x=1",
		scheme + "://" + host + "/db?token=" + q,
		scheme + "://" + host + "?password=" + secret,
		scheme + "://" + host + "#password=" + q,
		scheme + "://user:" + secret + "@" + host + "/db?password=" + q,
	}
}

// Leak returns the first of never that s contains, or "".
func Leak(s string, never []string) string {
	for _, n := range never {
		if strings.Contains(s, n) {
			return n
		}
	}
	return ""
}

// ErrorLeak returns the first of never that the message of err, or of
// any error it wraps, contains; or "".
func ErrorLeak(err error, never []string) string {
	if err == nil {
		return ""
	}
	if l := Leak(err.Error(), never); l != "" {
		return l
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, w := range u.Unwrap() {
			if l := ErrorLeak(w, never); l != "" {
				return l
			}
		}
	case interface{ Unwrap() error }:
		return ErrorLeak(u.Unwrap(), never)
	}
	return ""
}

// Backend names what the redaction checks of one backend package need:
// its URL schemes and its parser; the rest has defaults.
type Backend struct {
	Schemes []string
	// Parse runs the backend's URL parser, and nothing else: ParseErr
	// makes one of a parser with two results and an error.
	Parse func(*url.URL) error
	// Host is where the URLs point: a host list nothing listens on.
	// Default: 127.0.0.1:1, a loopback port nothing listens on.
	Host string
	// Open opens a client on the URL. Default: turnstile.Open.
	Open func(ctx context.Context, rawURL string) (io.Closer, error)
	// InvalidURL is the error every error of Parse wraps. Default:
	// turnstile.ErrInvalidURL.
	InvalidURL error
	// Lazy is set for a backend that opens without connecting.
	Lazy bool
	// User and Path make the URLs of the checks of refused URLs
	// (CheckAmbiguous, CheckUnknownParams) read up to their query:
	// scheme://User@Host+Path. User default: none; Path default: "/0".
	User, Path string
	// LooseParams is set for a backend whose driver takes query
	// parameters the parser does not know (postgres: libpq's): only a
	// misspelt secret's is refused there.
	LooseParams bool
}

// ParseErr returns a Parse function that runs parse and keeps only its
// error.
func ParseErr[A, B any](parse func(*url.URL) (A, B, error)) func(*url.URL) error {
	return func(u *url.URL) error {
		_, _, err := parse(u)
		return err
	}
}

// PasswordOf returns a PasswordFile.Password function that runs parse
// and returns what get reads from its first result.
func PasswordOf[A, B any](parse func(*url.URL) (A, B, error), get func(A) string) func(*url.URL) (string, error) {
	return func(u *url.URL) (string, error) {
		a, _, err := parse(u)
		if err != nil {
			return "", err
		}
		return get(a), nil
	}
}

// withDefaults returns b with its unset fields set to their defaults.
func (b Backend) withDefaults() Backend {
	if b.Host == "" {
		b.Host = "127.0.0.1:1"
	}
	if b.Open == nil {
		b.Open = func(ctx context.Context, raw string) (io.Closer, error) { return turnstile.Open(ctx, raw) }
	}
	if b.InvalidURL == nil {
		b.InvalidURL = turnstile.ErrInvalidURL
	}
	if b.Path == "" {
		b.Path = "/0"
	}
	return b
}

// Fuzz reads URLs that carry a secret in every place a URL can hold one
// and checks that no error of the parser shows the secret, or half of it.
func (b Backend) Fuzz(f *testing.F) {
	b = b.withDefaults()
	addSeeds(f)
	f.Fuzz(func(t *testing.T, x, y []byte, sepIdx uint8) {
		secret, never := Secret(x, y, Seps(sepIdx, x)...)
		for _, scheme := range b.Schemes {
			for _, raw := range URLs(scheme, b.Host, secret) {
				u, err := url.Parse(raw)
				if err != nil {
					continue // refused by turnstile.Open before it gets here
				}
				CheckParseError(t, raw, b.Parse(u), never, b.InvalidURL)
			}
		}
	})
}

// CheckParseError fails t if err, an error of a parser reading raw or
// nil, shows any of never, the secret of raw and its runs, or does not
// wrap invalid.
func CheckParseError(t *testing.T, raw string, err error, never []string, invalid error) {
	t.Helper()
	if err == nil {
		return
	}
	if leak := ErrorLeak(err, never); leak != "" {
		t.Fatalf("parseURL(%q): error %q shows the secret %q", raw, err, leak)
	}
	if !errors.Is(err, invalid) {
		t.Fatalf("parseURL(%q) = %v, want %v", raw, err, invalid)
	}
}

// addSeeds adds the seeds of a fuzz target that takes two inputs and
// a byte for Seps: each separator alone, and '@' followed by each other
// one, which cuts a password where url.Parse's user information seems
// to end.
func addSeeds(f *testing.F) {
	f.Add([]byte("hunter2"), []byte("correcthorse"), uint8(0))
	for i := range Separators {
		f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(i))
		f.Add([]byte("s3cr3tPW!"), []byte("batterystaple"), SepsIndex(atSep, i))
	}
}

// atSep is the index of "@" in Separators.
var atSep = slices.Index(Separators, "@")

// CheckOpen opens the URLs of each secret, with the server refusing
// connections, and checks that neither the parser's errors nor the
// driver's show the secret.
func (b Backend) CheckOpen(t *testing.T) {
	t.Helper()
	b = b.withDefaults()
	for i, sep := range Separators {
		// '@' then sep (which may cut the password where url.Parse's
		// user information seems to end) then '@' again.
		secret, never := Secret([]byte("s3cr3tPW"), []byte("batterystaple"), "@", sep, "@")
		for _, scheme := range b.Schemes {
			for _, raw := range URLs(scheme, b.Host, secret) {
				// The first secret is dialled (and refused); for the others
				// the context is cancelled already, which is quicker and
				// still goes through the parser and the driver's setup.
				b.checkRefused(t, raw, never, "secret", i > 0)
			}
		}
	}
}

// checkRefused opens raw, within 2 s or with a context cancelled already,
// with nothing listening, and checks that it fails, unless b is Lazy, and
// that the error shows none of never, the what.
func (b Backend) checkRefused(t *testing.T, raw string, never []string, what string, cancelled bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if cancelled {
		cancel()
	}
	c, err := b.Open(ctx, raw)
	cancel()
	if err == nil {
		_ = c.Close()
		if !b.Lazy {
			t.Fatalf("Open(%q) succeeded with nothing listening", raw)
		}
		return
	}
	if leak := ErrorLeak(err, never); leak != "" {
		t.Fatalf("Open(%q): error %q shows the %s %q", raw, err, what, leak)
	}
}

// PasswordFile names what the password_file checks of one backend need
// besides its Backend.
type PasswordFile struct {
	// URL is the URL before the query, with a user and no password, such
	// as "redis://locker@127.0.0.1:1/0". Default: the first scheme's
	// "user@" and Host.
	URL string
	// Extras are query parameters put after password_file, one string
	// each ("ca_file=/nonexistent", "x=1&y=2"), as the fuzzer's seeds.
	Extras []string
	// Password parses the URL as the backend does and returns the
	// password its driver gets.
	Password func(*url.URL) (string, error)
}

// FuzzPasswordFile writes a password with a secret in every shape to a
// file and reads URL?password_file=FILE&EXTRA, for the extras given and
// those the fuzzer makes: no error of the parser shows the secret, and
// every error wraps the backend's invalid-URL error; a URL that parses
// gives the driver the password as it is in the file (one trailing
// newline dropped), and a file of two lines is refused.
func (b Backend) FuzzPasswordFile(f *testing.F, p PasswordFile) {
	b = b.withDefaults()
	if p.URL == "" {
		p.URL = b.Schemes[0] + "://user@" + b.Host
	}
	f.Add([]byte("hunter2"), []byte("correcthorse"), uint8(0), "")
	for i, extra := range p.Extras {
		f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), SepsIndex(atSep, i), extra)
	}
	f.Fuzz(func(t *testing.T, x, y []byte, sepIdx uint8, extra string) {
		secret, never := Secret(x, y, Seps(sepIdx, x)...)
		if Leak(extra, never) != "" {
			return // the URL itself names the secret
		}
		file := filepath.Join(t.TempDir(), "pw")
		for _, lines := range []int{1, 2} {
			if err := os.WriteFile(file, []byte(strings.Repeat(secret+"\n", lines)), 0o600); err != nil {
				t.Fatal(err)
			}
			raw := p.URL + "?password_file=" + url.QueryEscape(file)
			if extra != "" {
				raw += "&" + extra
			}
			u, err := url.Parse(raw)
			if err != nil {
				return // refused by turnstile.Open before it gets here
			}
			got, err := p.Password(u)
			switch {
			case err != nil:
				CheckParseError(t, raw, err, never, b.InvalidURL)
			case lines > 1:
				t.Fatalf("parseURL(%q) read a password file of two lines", raw)
			case got != secret:
				t.Fatalf("parseURL(%q): the driver gets password %q, want the file's %q", raw, got, secret)
			}
		}
	})
}

// CheckPasswordFileOpen opens URL?password_file=FILE&EXTRA for each
// extra, with nothing listening, and checks that no error, the driver's
// included, shows the password from the file.
func (b Backend) CheckPasswordFileOpen(t *testing.T, p PasswordFile) {
	t.Helper()
	b = b.withDefaults()
	if p.URL == "" {
		p.URL = b.Schemes[0] + "://user@" + b.Host
	}
	secret, never := Secret([]byte("s3cr3tPW"), []byte("batterystaple"), "")
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range append([]string{""}, p.Extras...) {
		raw := p.URL + "?password_file=" + url.QueryEscape(file)
		if extra != "" {
			raw += "&" + extra
		}
		b.checkRefused(t, raw, never, "password", false)
	}
}
