package postgres

import (
	"crypto/tls"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the postgres:// URL parser never panics and refuses what
// it cannot use with ErrInvalidURL; what it accepts carries the
// lock_conns and op_timeout it was given, and options that apply. A URL
// with TLS parameters that it accepts connects to every TCP host over
// TLS only, verifying the server: no plain-text fallback, no skipped
// verification.
func FuzzParseURL(f *testing.F) {
	c := testcerts.New(f)
	seeds := urlcheck.TLSSeeds(c, []string{"postgres://u@h1,h2:5433/db?", "postgres://u@h/db?"},
		"ca_file="+c.CA+"&server_name=db.example.com", "ca_file="+c.OtherCA+"&sslmode=verify-full",
		"ca_file="+c.CA+"&sslmode=disable", "ca_file="+c.CA+"&sslmode=prefer", "ca_file="+c.CA+"&sslmode=require",
		"server_name=localhost&sslrootcert="+c.CA, "ca_file="+c.CA+"&ssl=true",
		"sslmode=verify-full&sslrootcert="+c.CA, "ca_file="+c.CA+"&lock_conns=2")
	urlParser.Fuzz(f, append(seeds,
		"postgres://u:p@127.0.0.1:5432/db", "postgresql://u@h/db?lock_conns=8&op_timeout=1s&sslmode=disable",
		"postgres://u@[::1]:5432/db", "postgres://u@h/db?lock_conns=0", "postgres://u@h/db?lock_conns=2000",
		"postgres://u@h/db?op_timeout=-1s", "postgres://u@h/db?lock_conns=1&lock_conns=2", "postgres:opaque",
		"postgres://u@h/db#f", "postgres://u@h/db?sslmode=bogus", "postgres://u@h:0/db", "postgres://h1,h2/db",
	)...)
}

// urlParser reads postgres:// URLs for FuzzParseURL.
var urlParser = urlcheck.Parser[*pgx.ConnConfig, []Option, config]{
	Parse: parseURL,
	Apply: func(opts []Option) (c config, err error) { c = defaultConfig(); err = c.apply(opts); return },
	Check: func(t *testing.T, raw string, u *url.URL, connCfg *pgx.ConnConfig, c config) {
		if connCfg == nil {
			t.Fatalf("parseURL(%q): no connection config and no error", raw)
		}
		if q := u.Query(); q.Has("ca_file") || q.Has("cert_file") || q.Has("key_file") || q.Has("server_name") {
			if p := connCfg.RuntimeParams; p["sslmode"] != "" || p["ca_file"] != "" {
				t.Fatalf("parseURL(%q): TLS parameters passed on to the server: %v", raw, p)
			}
			hosts := []string{connCfg.Host}
			tlsOn := []bool{connCfg.TLSConfig != nil}
			for _, fb := range connCfg.Fallbacks {
				hosts = append(hosts, fb.Host)
				tlsOn = append(tlsOn, fb.TLSConfig != nil)
			}
			for i, h := range hosts {
				unix := strings.HasPrefix(h, "/")
				if tlsOn[i] == unix {
					t.Fatalf("parseURL(%q): host %q with TLS %v", raw, h, tlsOn[i])
				}
			}
			for _, tc := range append([]*pgconnTLS{{connCfg.Host, connCfg.TLSConfig}}, fallbackTLS(connCfg)...) {
				if tc.cfg == nil {
					continue
				}
				if tc.cfg.InsecureSkipVerify || tc.cfg.ServerName == "" {
					t.Fatalf("parseURL(%q): host %q not verified (server name %q)", raw, tc.host, tc.cfg.ServerName)
				}
				if sn := q.Get("server_name"); sn != "" && tc.cfg.ServerName != sn {
					t.Fatalf("parseURL(%q): server name %q, want %q", raw, tc.cfg.ServerName, sn)
				}
			}
		}
		q := u.Query()
		if v := q.Get("lock_conns"); v != "" {
			if n, _ := strconv.Atoi(v); n != c.conns {
				t.Fatalf("parseURL(%q): %d lock connections", raw, c.conns)
			}
		}
		if v := q.Get("op_timeout"); v != "" {
			if d, _ := time.ParseDuration(v); d != c.opTimeout {
				t.Fatalf("parseURL(%q): op timeout %v", raw, c.opTimeout)
			}
		}
	},
}

type pgconnTLS struct {
	host string
	cfg  *tls.Config
}

func fallbackTLS(c *pgx.ConnConfig) []*pgconnTLS {
	var out []*pgconnTLS
	for _, f := range c.Fallbacks {
		out = append(out, &pgconnTLS{f.Host, f.TLSConfig})
	}
	return out
}
