package storeurl

import (
	"context"
	"net/url"

	"github.com/turnstilelock/turnstile/driver"
)

// Opener returns what a backend registers with turnstile.Register: a
// function that reads a URL with parse and dials what it read with dial.
func Opener[C, O any, B driver.Backend](parse func(*url.URL) (C, []O, error), dial func(context.Context, C, ...O) (B, error)) func(context.Context, *url.URL, driver.OpenConfig) (driver.Backend, error) {
	return func(ctx context.Context, u *url.URL, _ driver.OpenConfig) (driver.Backend, error) {
		c, opts, err := parse(u)
		if err != nil {
			return nil, err
		}
		b, err := dial(ctx, c, opts...)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}
