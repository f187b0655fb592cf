package fallback_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
)

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
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := turnstile.Open(ctx, raw)
			cancel()
			if err == nil {
				_ = c.Close()
				t.Fatalf("Open(%q) succeeded", raw)
			}
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := turnstile.Open(ctx, tc.raw)
		cancel()
		if err == nil {
			_ = c.Close()
			t.Fatalf("Open(%q) succeeded", tc.raw)
		}
		if !errors.Is(err, turnstile.ErrInvalidURL) || !strings.Contains(err.Error(), `"`+tc.name+`"`) {
			t.Fatalf("Open(%q) = %v; want ErrInvalidURL naming %q", tc.raw, err, tc.name)
		}
		if strings.Contains(err.Error(), "QJZVWK") {
			t.Fatalf("Open(%q): error %q shows the value", tc.raw, err)
		}
	}
}
