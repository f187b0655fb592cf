package fallback_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// fallbackURL is the fallback:// URL over the two stores, each
// percent-encoded as a query value.
func fallbackURL(primary, secondary string, extra ...string) string {
	q := "primary=" + url.QueryEscape(primary) + "&secondary=" + url.QueryEscape(secondary)
	for _, e := range extra {
		q += "&" + e
	}
	return "fallback://?" + q
}

// TestOpenURL: a fallback:// URL opens both stores, locks through the
// primary while it is up, and closing the Client closes both.
func TestOpenURL(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	srv := testserver.StartRedis(t)
	c, err := turnstile.Open(ctx, fallbackURL(srv.URL(), pg.URL(), "trip_after=2", "open_timeout=1s"), turnstile.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctx, "fallback-url")
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Backend().(interface{ Serving() (string, bool) }); !ok {
		t.Fatalf("the opened backend %T does not say which store serves", c.Backend())
	} else if name, _ := n.Serving(); !strings.HasPrefix(name, "redis") {
		t.Fatalf("serving %q, want the redis primary", name)
	}
	other, err := turnstile.Open(ctx, fallbackURL(srv.URL(), pg.URL()), turnstile.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.TryAcquire(ctx, "fallback-url"); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("a second Client took the held lock: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestOpenURLTTLAndGrace: without grace in the URL the grace covers the
// TTL; a grace shorter than the TTL is refused before anything is dialled.
func TestOpenURLTTLAndGrace(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	srv := testserver.StartRedis(t)
	c, err := turnstile.Open(ctx, fallbackURL(srv.URL(), pg.URL()), turnstile.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("TTL 1m without grace: %v", err)
	}
	l, err := c.TryAcquire(ctx, "fallback-ttl")
	if err != nil {
		t.Fatalf("a 1m lease over a grace derived from it: %v", err)
	}
	_ = l.Release(ctx)
	_ = c.Close()

	// Nobody listens on port 1: only a refusal before dialling is quick.
	_, err = turnstile.Open(ctx, fallbackURL("redis://127.0.0.1:1", "postgres://127.0.0.1:1/x", "grace=10s"), turnstile.WithTTL(20*time.Second))
	if !errors.Is(err, turnstile.ErrInvalidTTL) || !strings.Contains(err.Error(), "grace=10s") {
		t.Fatalf("TTL 20s over grace=10s: %v, want ErrInvalidTTL naming grace=10s", err)
	}
}

// TestBadURLs: every mistake is ErrInvalidURL, names the part that is
// wrong (which inner URL, for those) and shows no password.
func TestBadURLs(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	const pw = "s3cr3tPW"
	good := "redis://:" + pw + "@127.0.0.1:1"
	for _, tc := range []struct{ url, want string }{
		{"fallback://", "no primary"},
		{"fallback://?primary=" + url.QueryEscape(good), "no secondary"},
		{fallbackURL(good, good), "same store"},
		{fallbackURL("mem://", "nope"), "secondary"},
		{fallbackURL("postgres:// "+pw+"@h", good), "primary"},
		{fallbackURL(good, "fallback://?primary=x"), "secondary"},
		{fallbackURL("mem://", "redis://:"+pw+"@h:99999"), "secondary"},
		{fallbackURL("unknown://u:"+pw+"@h", good), "primary"},
		{fallbackURL(good, "mem://", "grace=0s"), "grace"},
		{fallbackURL(good, "mem://", "trip_after=0"), "trip_after"},
		{fallbackURL(good, "mem://", "colour=red"), "colour"},
		{"fallback://host?primary=" + url.QueryEscape(good), "not a host"},
		{"fallback://u:" + pw + "@?primary=" + url.QueryEscape(good), "user information"},
		{"fallback://?primary=mem://&secondary=redis://:" + pw + "@h:99999", "secondary"},
		{"fallback://?primary=redis://:" + pw + "@h:99999&secondary=mem://", "primary"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := turnstile.Open(ctx, tc.url)
			if err == nil || !(errors.Is(err, turnstile.ErrInvalidURL) || errors.Is(err, turnstile.ErrUnknownScheme)) {
				t.Fatalf("Open = %v, want ErrInvalidURL", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), url.QueryEscape(pw)) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

// TestAmbiguousInnerURL: an inner URL whose password holds an '@' and
// then a '/', '?' or '#' unencoded — Redis, Redis through Sentinels,
// PostgreSQL — as primary or secondary, written as it is or
// percent-encoded, is refused before either store is opened (no host
// looked up), with an error that names no part of its user
// information.
func TestAmbiguousInnerURL(t *testing.T) {
	lookups := redacttest.RecordLookups(t)
	var inners []string
	for _, scheme := range []string{"redis", "redis+sentinel", "postgres"} {
		inners = append(inners, redacttest.AmbiguousURLs(scheme, "127.0.0.1:1", "/0")...)
	}
	for _, inner := range inners {
		for _, raw := range []string{
			fallbackURL(inner, "mem://"),
			fallbackURL("mem://", inner),
			"fallback://?primary=" + inner + "&secondary=mem://",
			"fallback://?secondary=mem://&primary=" + inner,
		} {
			err := openRefused(t, raw)
			if !errors.Is(err, turnstile.ErrInvalidURL) || !errors.Is(err, redact.ErrAmbiguous) {
				t.Fatalf("Open(%q) = %v; want ErrInvalidURL, ambiguous", raw, err)
			}
			for _, piece := range []string{"hunter2", "corp", "2024"} {
				if strings.Contains(err.Error(), piece) {
					t.Fatalf("Open(%q) = %q: shows %q", raw, err, piece)
				}
			}
			if q := lookups(); len(q) > 0 {
				t.Fatalf("Open(%q) looked up %q", raw, q)
			}
		}
	}
}

// TestUnknownParamRedacted: an unknown query parameter of the fallback
// URL or of an inner URL, a misspelt password= among them, is refused
// by its name, and its value shows nowhere in the error.
func TestUnknownParamRedacted(t *testing.T) {
	const value = "QJZVWKunknownQJZVWK"
	for _, tc := range []struct{ raw, name string }{
		{fallbackURL("redis://127.0.0.1:1", "mem://", "pasword="+value), "pasword"},
		{fallbackURL("redis://127.0.0.1:1", "mem://", "pw="+url.QueryEscape(value+"@/?")), "pw"},
		{fallbackURL("redis://127.0.0.1:1?pasword="+value, "mem://"), "pasword"},
		{fallbackURL("mem://", "postgres://u@127.0.0.1:1/db?pasword="+url.QueryEscape(value+"@")), "pasword"},
		{fallbackURL("redis://127.0.0.1:1?x="+url.QueryEscape(value+"%"), "mem://"), "x"},
		{"fallback://?primary=redis://127.0.0.1:1?pasword=" + value + "&secondary=mem://", "pasword"},
	} {
		err := openRefused(t, tc.raw)
		if !errors.Is(err, turnstile.ErrInvalidURL) || !strings.Contains(err.Error(), `"`+tc.name+`"`) {
			t.Fatalf("Open(%q) = %v; want ErrInvalidURL naming %q", tc.raw, err, tc.name)
		}
		if strings.Contains(err.Error(), "QJZVWK") {
			t.Fatalf("Open(%q): error %q shows the value", tc.raw, err)
		}
	}
}

// openRefused opens raw and fails t if that succeeds; it returns the
// error.
func openRefused(t *testing.T, raw string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := turnstile.Open(ctx, raw)
	if err == nil {
		_ = c.Close()
		t.Fatalf("Open(%q) succeeded", raw)
	}
	return err
}

// TestURLDefaultGrace: a Client with the default TTL gets DefaultGrace.
func TestURLDefaultGrace(t *testing.T) {
	if fallback.DefaultGrace < turnstile.DefaultTTL {
		t.Fatalf("DefaultGrace %v is shorter than the default TTL %v", fallback.DefaultGrace, turnstile.DefaultTTL)
	}
}
