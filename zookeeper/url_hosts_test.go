package zookeeper

import (
	"net/url"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// TestURLHosts: servers named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
func TestURLHosts(t *testing.T) {
	storeurltest.Hosts{Scheme: "zookeeper", Port: "2181", List: true, Invalid: turnstile.ErrInvalidURL,
		Addrs: func(u *url.URL) ([]string, error) {
			servers, _, err := parseURL(u)
			return servers, err
		},
	}.Check(t)
}
