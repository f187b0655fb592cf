package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
)

// FuzzUserinfo builds URLs with a secret of several runs and separators
// ('@', '/', '?', '#' among them, unencoded) in every place a URL holds
// one — the password of the user information, secret query parameters,
// the inner URLs of fallback://, written as they are or percent-encoded
// — and checks that no run of the secret shows in URL's output, nor in
// an error that repeats every part url.Parse makes of the URL, masked
// with Error. A URL that Ambiguous passes gives url.Parse's password as
// the whole secret, where the secret is the password.
func FuzzUserinfo(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, x, y []byte, sepIdx uint8) {
		secret, never := redacttest.Secret(x, y, redacttest.Seps(sepIdx, x)...)
		for _, raw := range fuzzURLs(secret) {
			if got := redact.URL(raw); redacttest.Leak(got, never) != "" {
				t.Fatalf("URL(%q) = %q shows %q", raw, got, redacttest.Leak(got, never))
			}
			err := redact.Error(echo(raw), raw)
			if leak := redacttest.ErrorLeak(err, never); leak != "" {
				t.Fatalf("Error(…, %q) = %q shows %q", raw, err, leak)
			}
			if strings.HasPrefix(raw, "redis://user:"+secret+"@") && !redact.Ambiguous(raw) {
				u, perr := url.Parse(raw)
				if perr != nil {
					continue
				}
				want, uerr := url.PathUnescape(secret)
				if pw, _ := u.User.Password(); uerr == nil && pw != want {
					t.Fatalf("%q passes Ambiguous, but url.Parse reads the password %q, not %q", raw, pw, want)
				}
			}
		}
	})
}

// seeds adds the fuzz seeds: each separator alone, and '@' followed by
// each one.
func seeds(f *testing.F) {
	at := 0
	for i, s := range redacttest.Separators {
		if s == "@" {
			at = i
		}
	}
	for i := range redacttest.Separators {
		f.Add([]byte("hunter2"), []byte("corp"), uint8(i))
		f.Add([]byte("hunter2!"), []byte("corp2024"), redacttest.SepsIndex(at, i))
	}
}

// fuzzURLs are URLs with secret: those of redacttest.URLs for a Redis
// server and for Sentinels, and fallback:// URLs with those of the
// server as their primary.
func fuzzURLs(secret string) []string {
	urls := redacttest.URLs("redis", "127.0.0.1:1", secret)
	urls = append(urls, redacttest.URLs("redis+sentinel", "s1:26379,s2", secret)...)
	inners := redacttest.URLs("redis", "127.0.0.1:1", secret)
	inners = append(inners, redacttest.URLs("redis+sentinel", "s1,s2", secret)...)
	for _, inner := range inners {
		urls = append(urls,
			"fallback://?primary="+inner+"&secondary=mem://",
			"fallback://?primary="+url.QueryEscape(inner)+"&secondary=mem://",
			"fallback://?secondary=mem://&primary="+inner,
		)
	}
	return urls
}

// echo is an error that repeats raw and every part url.Parse makes of
// it, as a careless parser or driver might.
func echo(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse %s: %w", raw, err)
	}
	pw, _ := u.User.Password()
	var q []string
	for name, vals := range u.Query() {
		q = append(q, name+"="+strings.Join(vals, ","))
		for _, v := range vals {
			if strings.Contains(v, "://") {
				q = append(q, "inner "+echo(v).Error())
			}
		}
	}
	return errors.New(strings.Join([]string{
		raw, u.String(), u.Scheme, u.Opaque, u.User.Username(), pw, u.Host, u.Hostname(), u.Port(),
		u.Path, u.RawPath, u.RawQuery, u.Fragment, strings.Join(q, " "),
	}, " | "))
}
