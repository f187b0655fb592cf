package redis

import (
	"net/url"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// TestURLHosts: nodes named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
func TestURLHosts(t *testing.T) {
	for _, scheme := range []string{"redis", "rediss"} {
		storeurltest.Hosts{Scheme: scheme, User: true, Port: "6379", List: true, Invalid: turnstile.ErrInvalidURL,
			Addrs: func(u *url.URL) ([]string, error) {
				opt, _, err := parseURL(u)
				return opt.InitAddress, err
			},
		}.Check(t)
	}
}
