package etcd

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
)

// redactSchemes and redactHost make the URLs of the redaction tests:
// nothing listens on port 1 or 2 of the loopback address.
var redactSchemes = []string{"etcd"}

const redactHost = "127.0.0.1:1"

// FuzzParseURLRedacts reads URLs that carry a secret in every place a URL
// can hold one and checks that no error shows the secret, or half of it.
func FuzzParseURLRedacts(f *testing.F) {
	f.Add([]byte("hunter2"), []byte("correcthorse"), uint8(0))
	for i := range redacttest.Separators {
		f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(i))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, sepIdx uint8) {
		secret, never := redacttest.Secret(a, b, redacttest.Separators[int(sepIdx)%len(redacttest.Separators)])
		for _, scheme := range redactSchemes {
			for _, raw := range redacttest.URLs(scheme, redactHost, secret) {
				u, err := url.Parse(raw)
				if err != nil {
					continue // refused by turnstile.Open before it gets here
				}
				_, _, err = parseURL(u)
				if err == nil {
					continue
				}
				if leak := redacttest.ErrorLeak(err, never); leak != "" {
					t.Fatalf("parseURL(%q): error %q shows the secret %q", raw, err, leak)
				}
				if !errors.Is(err, turnstile.ErrInvalidURL) {
					t.Fatalf("parseURL(%q) = %v, want ErrInvalidURL", raw, err)
				}
			}
		}
	})
}

// TestOpenRedacts opens the URLs of each secret, with the server
// refusing connections, and checks that neither the parser's errors nor
// the driver's show the secret.
func TestOpenRedacts(t *testing.T) {
	for i, sep := range redacttest.Separators {
		secret, never := redacttest.Secret([]byte("s3cr3tPW"), []byte("batterystaple"), sep)
		for _, scheme := range redactSchemes {
			for _, raw := range redacttest.URLs(scheme, redactHost, secret) {
				// The first secret is dialled (and refused); for the others
				// the context is cancelled already, which is quicker and
				// still goes through the parser and the driver's setup.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if i > 0 {
					cancel()
				}
				c, err := turnstile.Open(ctx, raw)
				cancel()
				if err == nil {
					// Without user information the client connects lazily.
					_ = c.Close()
					continue
				}
				if leak := redacttest.ErrorLeak(err, never); leak != "" {
					t.Fatalf("Open(%q): error %q shows the secret %q", raw, err, leak)
				}
			}
		}
	}
}
