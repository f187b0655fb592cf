package redlock

import (
	"context"
	"io"
	"net/url"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
)

// redactChecks point at loopback ports nothing listens on.
var redactChecks = redacttest.Backend{
	Schemes: []string{"redlock"},
	Host:    "127.0.0.1:1,127.0.0.1:2",
	Parse: func(u *url.URL) error {
		_, _, _, err := parseURL(u)
		return err
	},
	Open: func(ctx context.Context, raw string) (io.Closer, error) {
		return turnstile.Open(ctx, raw)
	},
	InvalidURL: turnstile.ErrInvalidURL,
}

// FuzzParseURLRedacts: no error of the URL parser shows a secret the URL
// carries, wherever it stands.
func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

// TestOpenRedacts: neither the parser's errors nor the driver's show a
// secret, with the server refusing connections.
func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }
