package redlock

import (
	"net/url"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// TestURLHosts: nodes named by IPv6 literals, alone and in lists, are
// dialled at their addresses (not as [[::1]]:6379); malformed ones make
// an invalid URL.
func TestURLHosts(t *testing.T) {
	storeurltest.Hosts{Scheme: "redlock", User: true, Port: "6379", List: true, Invalid: turnstile.ErrInvalidURL,
		Addrs: func(u *url.URL) ([]string, error) {
			addrs, _, _, err := parseURL(u)
			return addrs, err
		},
	}.Check(t)
}
