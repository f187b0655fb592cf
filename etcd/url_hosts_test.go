package etcd

import (
	"net/url"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// TestURLHosts: members named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
func TestURLHosts(t *testing.T) {
	storeurltest.Hosts{Scheme: "etcd", User: true, Port: "2379", List: true, Invalid: turnstile.ErrInvalidURL,
		Addrs: func(u *url.URL) (addrs []string, err error) {
			cfg, _, err := parseURL(u)
			for _, ep := range cfg.Endpoints {
				addrs = append(addrs, strings.TrimPrefix(ep, "http://"))
			}
			return addrs, err
		},
	}.Check(t)
}
