// Package badurl checks that turnstile.Open refuses URLs a store's
// parser cannot use.
package badurl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Refused runs a subtest of t for each of urls that fails unless
// turnstile.Open refuses the URL with turnstile.ErrInvalidURL. A Client
// that opens all the same is closed.
func Refused(t *testing.T, urls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, u := range urls {
		t.Run(u, func(t *testing.T) {
			c, err := turnstile.Open(ctx, u)
			if err == nil {
				_ = c.Close()
			}
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("Open(%q) = %v, want ErrInvalidURL", u, err)
			}
		})
	}
}
