package fallback

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
)

// FuzzParseURL: the fallback:// parser never panics, refuses what it
// cannot use with ErrInvalidURL and without showing a password of the
// URL or of its inner URLs, and what it accepts names two distinct inner
// URLs with a scheme, neither of them a fallback URL.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"fallback://?primary=redis://h:1&secondary=postgres://u@h/db",
		"fallback://?primary=redis%3A%2F%2F%3Apw%40h&secondary=mem%3A%2F%2F&grace=40s&trip_after=3&open_timeout=2s",
		"fallback://?primary=redis://:pw@h&secondary=redis://:pw@h",
		"fallback://h?primary=x", "fallback://?primary=fallback://?primary=a", "fallback://?primary=a&primary=b",
		"fallback://?primary=redis://:p%2540ss@h&secondary=nope", "fallback:?x", "fallback://?grace=1ns",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return // Open refuses it before any backend sees it
		}
		c, err := parseURL(u)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v; want ErrInvalidURL", raw, err)
			}
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
			return
		}
		if c.primary == "" || c.secondary == "" || c.primary == c.secondary {
			t.Fatalf("parseURL(%q) accepted stores %q and %q", raw, c.primary, c.secondary)
		}
		for _, in := range []string{c.primary, c.secondary} {
			scheme, _, ok := strings.Cut(in, ":")
			if !ok || scheme == "" || strings.EqualFold(scheme, "fallback") {
				t.Fatalf("parseURL(%q) accepted the inner URL %q", raw, in)
			}
		}
		cfg := defaultConfig()
		if err := cfg.apply(c.opts); err != nil {
			t.Fatalf("parseURL(%q) read options that New refuses: %v", raw, err)
		}
	})
}
