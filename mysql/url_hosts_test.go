package mysql

import (
	"net/url"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// TestURLHosts: a server named by an IPv6 literal is dialled at its
// address; a malformed one, or several hosts, make an invalid URL.
func TestURLHosts(t *testing.T) {
	storeurltest.Hosts{Scheme: "mysql", User: true, Path: "/db", Port: "3306", Invalid: turnstile.ErrInvalidURL,
		Addrs: func(u *url.URL) ([]string, error) {
			cfg, _, err := parseURL(u)
			if err != nil {
				return nil, err
			}
			return []string{cfg.Addr}, nil
		},
	}.Check(t)
}
