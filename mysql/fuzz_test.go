package mysql

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the mysql:// URL parser never panics and refuses what it
// cannot use with ErrInvalidURL; what it accepts has a usable address, a
// user and one database, and the URL written back from the settings it
// read parses to the same settings. A URL with TLS parameters that it
// accepts verifies the server over TLS, with no plain-text fallback.
func FuzzParseURL(f *testing.F) {
	c := testcerts.New(f)
	seeds := urlcheck.TLSSeeds(c, []string{"mysql://u@h:3307/db?"},
		"ca_file="+c.CA+"&server_name=db.example.com&tls=true", "ca_file="+c.OtherCA+"&tls=false",
		"ca_file="+c.CA+"&tls=skip-verify", "server_name=h&tls=preferred", "ca_file="+c.CA+"&conns=2")
	urlParser.Fuzz(f, append(seeds,
		"mysql://u:p@127.0.0.1:3306/db", "mysql://u@h/db?conns=8&dial_timeout=1s&tls=skip-verify",
		"mysql://u@[::1]:3306/db", "mysql://h/db", "mysql://u@h/", "mysql://u@h/a/b", "mysql://u@h:0/db",
		"mysql://u@h/db?conns=0", "mysql://u@h/db?tls=maybe", "mysql://u@h/db?x=1", "mysql:opaque",
		"mysql://u@h/db#f", "mysql://:p@h/db", "mysql://u@/db", "mysql://u@a]:1/db",
	)...)
}

// urlParser reads mysql:// URLs for FuzzParseURL.
var urlParser = urlcheck.Parser[*gomysql.Config, []Option, config]{
	Parse: parseURL,
	Apply: func(opts []Option) (c config, err error) { c = defaultConfig(); err = c.apply(opts); return },
	Check: func(t *testing.T, raw string, u *url.URL, cfg *gomysql.Config, _ config) {
		if q := u.Query(); q.Has("ca_file") || q.Has("cert_file") || q.Has("key_file") || q.Has("server_name") {
			switch {
			case cfg.TLS == nil || cfg.TLSConfig != "" || cfg.AllowFallbackToPlaintext:
				t.Fatalf("parseURL(%q): TLS %v, tls=%q, fallback %v", raw, cfg.TLS != nil, cfg.TLSConfig, cfg.AllowFallbackToPlaintext)
			case cfg.TLS.InsecureSkipVerify || cfg.TLS.ServerName == "":
				t.Fatalf("parseURL(%q): server not verified (name %q)", raw, cfg.TLS.ServerName)
			case q.Get("server_name") != "" && cfg.TLS.ServerName != q.Get("server_name"):
				t.Fatalf("parseURL(%q): server name %q", raw, cfg.TLS.ServerName)
			}
		}
		urlcheck.CheckHostPorts(t, raw, "address", cfg.Addr)
		if cfg.User == "" || cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
			t.Fatalf("parseURL(%q): user %q, database %q", raw, cfg.User, cfg.DBName)
		}
	},
	Format: func(_ *url.URL, cfg *gomysql.Config, c config) string {
		back := url.URL{Scheme: "mysql", Host: cfg.Addr, User: url.UserPassword(cfg.User, cfg.Passwd), Path: "/" + cfg.DBName}
		q := url.Values{"conns": {strconv.Itoa(c.conns)}, "dial_timeout": {cfg.Timeout.String()}}
		if cfg.TLSConfig != "" {
			q.Set("tls", cfg.TLSConfig)
		}
		back.RawQuery = q.Encode()
		return back.String()
	},
	Differ: func(cfg *gomysql.Config, c config, cfg2 *gomysql.Config, c2 config) bool {
		return cfg.Addr != cfg2.Addr || cfg.User != cfg2.User || cfg.Passwd != cfg2.Passwd || cfg.DBName != cfg2.DBName ||
			cfg.Timeout != cfg2.Timeout || cfg.TLSConfig != cfg2.TLSConfig || c.conns != c2.conns
	},
}

// FuzzLockName: a row's name fits 64 characters; a key that fits and
// does not start with "ts:" is its own name; every key's name is the
// same on every call; and two keys never share a name (a hashed name
// starts with "ts:", which no key kept as its name does).
func FuzzLockName(f *testing.F) {
	f.Add("k", "k2")
	f.Add(strings.Repeat("k", maxNameLen), strings.Repeat("k", maxNameLen+1))
	f.Add(strings.Repeat("é", 40), strings.Repeat("é", 41))
	long := strings.Repeat("x", 100)
	f.Add(long, LockName(long))
	f.Add("ts:", "ts:x")
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		n1, n2 := LockName(k1), LockName(k2)
		for _, kn := range [][2]string{{k1, n1}, {k2, n2}} {
			if len(kn[1]) > maxNameLen || utf8.RuneCountInString(kn[1]) > maxNameLen {
				t.Fatalf("key of %d bytes: name %q is over %d characters", len(kn[0]), kn[1], maxNameLen)
			}
			if len(kn[0]) <= maxNameLen && !strings.HasPrefix(kn[0], "ts:") && kn[1] != kn[0] {
				t.Fatalf("key %q: name %q", kn[0], kn[1])
			}
			if LockName(kn[0]) != kn[1] {
				t.Fatalf("key %q: two names", kn[0])
			}
		}
		if k1 != k2 && n1 == n2 {
			t.Fatalf("keys %q and %q share the name %q", k1, k2, n1)
		}
	})
}
