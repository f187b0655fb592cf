package fallback

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the fallback:// parser never panics, refuses what it
// cannot use with ErrInvalidURL and without showing a password of the
// URL or of its inner URLs, and what it accepts names two distinct inner
// URLs with a scheme, neither of them a fallback URL.
func FuzzParseURL(f *testing.F) {
	urlParser.Fuzz(f,
		"fallback://?primary=redis://h:1&secondary=postgres://u@h/db",
		"fallback://?primary=redis%3A%2F%2F%3Apw%40h&secondary=mem%3A%2F%2F&grace=40s&trip_after=3&open_timeout=2s",
		"fallback://?primary=redis://:pw@h&secondary=redis://:pw@h",
		"fallback://h?primary=x", "fallback://?primary=fallback://?primary=a", "fallback://?primary=a&primary=b",
		"fallback://?primary=redis://h:1&secondary=postgres://u@h/db&pair=orders-eu.1", "fallback://?primary=a:b&secondary=c:d&pair=bad/name",
		"fallback://?primary=redis://:p%2540ss@h&secondary=nope", "fallback:?x", "fallback://?grace=1ns",
	)
}

// urlParser reads fallback:// URLs for FuzzParseURL.
var urlParser = urlcheck.Parser[urlConfig, []Option, config]{
	Parse: func(u *url.URL) (urlConfig, []Option, error) {
		c, err := parseURL(u)
		return c, c.opts, err
	},
	Apply: func(opts []Option) (c config, err error) { c = defaultConfig(); err = c.apply(opts); return },
	Check: func(t *testing.T, raw string, _ *url.URL, c urlConfig, _ config) {
		if c.primary == "" || c.secondary == "" || c.primary == c.secondary {
			t.Fatalf("parseURL(%q) accepted stores %q and %q", raw, c.primary, c.secondary)
		}
		for _, in := range []string{c.primary, c.secondary} {
			scheme, _, ok := strings.Cut(in, ":")
			if !ok || scheme == "" || strings.EqualFold(scheme, "fallback") {
				t.Fatalf("parseURL(%q) accepted the inner URL %q", raw, in)
			}
		}
	},
	Refused: func(t *testing.T, raw string, u *url.URL, err error) {
		for _, v := range u.Query() {
			for _, inner := range v {
				iu, perr := url.Parse(inner)
				if perr != nil || iu.User == nil {
					continue
				}
				if pw, ok := iu.User.Password(); ok && len(pw) >= 6 && strings.Contains(err.Error(), pw) {
					t.Fatalf("parseURL(%q): error %q shows the password %q", raw, err, pw)
				}
			}
		}
	},
}

// FuzzParseSwitch: reading a switch lock of the register never panics,
// and what it accepts is a switch lock as switchOwner writes it: a
// number without leading zeros after the prefix, a direction, a
// 16-digit hex id and a grace of 1 ms to 24 h, which it reads back.
func FuzzParseSwitch(f *testing.F) {
	f.Add("turnstile:fallback/7", switchOwner(dirFailover, 31*time.Second))
	f.Add("turnstile:fallback/12", switchOwner(dirFailback, time.Millisecond))
	f.Add("turnstile:fallback/07", "turnstile-fallback failover 0123456789abcdef grace=31000ms")
	f.Add("turnstile:fallback/1", "turnstile-fallback failover 0123456789abcdeg grace=31000ms")
	f.Add("turnstile:fallback/18446744073709551616", "turnstile-fallback failback 0123456789abcdef grace=1ms")
	f.Add("turnstile:fallback/1", "turnstile-fallback failover 0123456789abcdef grace=-5ms")
	f.Add("turnstile:fallback/1", "app/1234")
	f.Fuzz(func(t *testing.T, key, owner string) {
		n, dir, grace, err := parseSwitch("turnstile:fallback/", key, owner)
		if err != nil {
			if !errors.Is(err, errForeign) {
				t.Fatalf("parseSwitch(%q, %q) = %v, want errForeign", key, owner, err)
			}
			return
		}
		if n == 0 || (dir != dirFailover && dir != dirFailback) || grace < time.Millisecond || grace > 24*time.Hour || grace%time.Millisecond != 0 {
			t.Fatalf("parseSwitch(%q, %q) accepted %d %q %v", key, owner, n, dir, grace)
		}
		if want := "turnstile:fallback/" + strconv.FormatUint(n, 10); key != want {
			t.Fatalf("parseSwitch(%q) read number %d, whose key is %q", key, n, want)
		}
		again := switchOwner(dir, grace)
		if _, d, g, err := parseSwitch("turnstile:fallback/", key, again); err != nil || d != dir || g != grace {
			t.Fatalf("switchOwner(%q, %v) = %q reads back as %q %v %v", dir, grace, again, d, g, err)
		}
	})
}

// FuzzInnerURLRedacts: inner URLs with a secret of several runs and
// separators ('@', '/', '?' and '#' among them, unencoded) in every place
// a URL holds one, as primary or secondary, written as they are or
// percent-encoded: no error of the parser shows a run of the secret, and
// every error wraps ErrInvalidURL.
func FuzzInnerURLRedacts(f *testing.F) {
	at := slices.Index(redacttest.Separators, "@")
	for i := range redacttest.Separators {
		f.Add([]byte("hunter2"), []byte("corp2024"), redacttest.SepsIndex(at, i))
	}
	f.Fuzz(func(t *testing.T, x, y []byte, sepIdx uint8) {
		secret, never := redacttest.Secret(x, y, redacttest.Seps(sepIdx, x)...)
		for _, scheme := range []string{"redis", "redis+sentinel", "postgres"} {
			for _, inner := range redacttest.URLs(scheme, "127.0.0.1:1", secret) {
				for _, raw := range []string{
					"fallback://?primary=" + url.QueryEscape(inner) + "&secondary=mem://",
					"fallback://?primary=mem://&secondary=" + inner,
					"fallback://?primary=" + inner + "&secondary=mem://",
				} {
					u, err := url.Parse(raw)
					if err != nil {
						continue // Open refuses it before any backend sees it
					}
					_, err = parseURL(u)
					redacttest.CheckParseError(t, raw, err, never, turnstile.ErrInvalidURL)
				}
			}
		}
	})
}
