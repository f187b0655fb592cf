package postgres

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// TestURLHosts: servers named by IPv6 literals, alone and in lists, reach
// pgx as those addresses; malformed ones make an invalid URL.
func TestURLHosts(t *testing.T) {
	storeurltest.Hosts{Scheme: "postgres", User: true, Path: "/db", Port: "5432", List: true, Invalid: turnstile.ErrInvalidURL,
		Addrs: func(u *url.URL) ([]string, error) {
			cfg, _, err := parseURL(u)
			if err != nil {
				return nil, err
			}
			// pgx tries the first host, then its fallbacks (each host once
			// per TLS mode to try).
			addrs := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
			for _, f := range cfg.Fallbacks {
				if a := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(addrs, a) {
					addrs = append(addrs, a)
				}
			}
			return addrs, nil
		},
	}.Check(t)
}
