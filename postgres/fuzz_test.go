package postgres

import (
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// FuzzParseURL: the postgres:// URL parser never panics and refuses what
// it cannot use with ErrInvalidURL; what it accepts carries the
// lock_conns and op_timeout it was given, and options that apply.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"postgres://u:p@127.0.0.1:5432/db", "postgresql://u@h/db?lock_conns=8&op_timeout=1s&sslmode=disable",
		"postgres://u@[::1]:5432/db", "postgres://u@h/db?lock_conns=0", "postgres://u@h/db?lock_conns=2000",
		"postgres://u@h/db?op_timeout=-1s", "postgres://u@h/db?lock_conns=1&lock_conns=2", "postgres:opaque",
		"postgres://u@h/db#f", "postgres://u@h/db?sslmode=bogus", "postgres://u@h:0/db", "postgres://h1,h2/db",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return // Open refuses it before any backend sees it
		}
		connCfg, opts, err := parseURL(u)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v; want ErrInvalidURL", raw, err)
			}
			return
		}
		if connCfg == nil {
			t.Fatalf("parseURL(%q): no connection config and no error", raw)
		}
		c := defaultConfig()
		if err := c.apply(opts); err != nil {
			t.Fatalf("parseURL(%q) accepted options that fail: %v", raw, err)
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
	})
}
