package etcd

import (
	"crypto/tls"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the etcd:// URL parser never panics and refuses what it
// cannot use with ErrInvalidURL; what it accepts is one usable
// http://host:port endpoint per host (https:// with TLS, which always
// verifies the server), and the URL written back from the settings it
// read parses to the same settings.
func FuzzParseURL(f *testing.F) {
	urlParser.Fuzz(f,
		"etcd://127.0.0.1:2379", "etcd://u:p@h1,h2:2?prefix=/app/&dial_timeout=1s", "etcd://[::1]:2379",
		"etcd://", "etcd://h1,,h2", "etcd://h:", "etcd://h:0", "etcd://h/x", "etcd://h/", "etcd://h?prefix=",
		"etcd://h?dial_timeout=0s", "etcd://h?x=1", "etcd:opaque", "etcd://h#f", "etcd://a]:1", "etcd://::1",
		"etcd://h?tls=on", "etcd://h?tls=off", "etcd://h?tls=1&server_name=localhost", "etcd://h?tls=off&server_name=x",
		"etcd://h?ca_file=/nonexistent", "etcd://h?cert_file=a", "etcd://h?key_file=b", "etcd://h?server_name=a%20b",
		"etcd://u@h?password_file=/nonexistent", "etcd://u@h", "etcd://:p@h", "etcd://h?tls=",
		"etcd://h?batch=1", "etcd://h?batch=64", "etcd://h?batch=0", "etcd://h?batch=1025", "etcd://h?batch=x",
	)
}

// urlParser reads etcd:// URLs for FuzzParseURL.
var urlParser = urlcheck.Parser[clientv3.Config, []Option, config]{
	Parse: parseURL,
	Apply: func(opts []Option) (c config, err error) { c = defaultConfig(); err = c.apply(opts); return },
	Check: func(t *testing.T, raw string, _ *url.URL, cfg clientv3.Config, _ config) {
		scheme := "http://"
		if cfg.TLS != nil {
			scheme = "https://"
			if cfg.TLS.InsecureSkipVerify || cfg.TLS.MinVersion < tls.VersionTLS12 {
				t.Fatalf("parseURL(%q): TLS without verification or below 1.2", raw)
			}
		}
		for _, ep := range cfg.Endpoints {
			if !strings.HasPrefix(ep, scheme) {
				t.Fatalf("parseURL(%q): endpoint %q is not %shost:port", raw, ep, scheme)
			}
			urlcheck.CheckHostPorts(t, raw, "endpoint", strings.TrimPrefix(ep, scheme))
		}
	},
	Format: func(_ *url.URL, cfg clientv3.Config, c config) string {
		var hosts []string
		for _, ep := range cfg.Endpoints {
			_, hp, _ := strings.Cut(ep, "://")
			hosts = append(hosts, hp)
		}
		back := url.URL{Scheme: "etcd", Host: strings.Join(hosts, ",")}
		if cfg.Username != "" || cfg.Password != "" {
			back.User = url.UserPassword(cfg.Username, cfg.Password)
		}
		q := url.Values{"dial_timeout": {cfg.DialTimeout.String()}, "prefix": {c.prefix}, "batch": {strconv.Itoa(c.batch)}}
		urlcheck.SetTLS(q, cfg.TLS)
		back.RawQuery = q.Encode()
		return back.String()
	},
	Differ: func(cfg clientv3.Config, c config, cfg2 clientv3.Config, c2 config) bool {
		return !slices.Equal(cfg.Endpoints, cfg2.Endpoints) || cfg.Username != cfg2.Username || cfg.Password != cfg2.Password ||
			cfg.DialTimeout != cfg2.DialTimeout || c.prefix != c2.prefix || c.batch != c2.batch || (cfg.TLS == nil) != (cfg2.TLS == nil) ||
			cfg.TLS != nil && cfg.TLS.ServerName != cfg2.TLS.ServerName
	},
}

// FuzzNames: under one prefix, two different keys never share a lock key
// or a waiters' directory, no key's directory contains another's, and
// lock keys and waiters never mix.
func FuzzNames(f *testing.F) {
	f.Add("/turnstile/", "a", "a/b")
	f.Add("/turnstile/", "a/", "a")
	f.Add("/t/", "x%2Fy", "x/y")
	f.Add("p", "../locks/x", "x")
	f.Add("/t/", "a", "b")
	f.Fuzz(func(t *testing.T, prefix, k1, k2 string) {
		c := defaultConfig()
		if prefix == "" || k1 == "" || k2 == "" || k1 == k2 {
			return
		}
		if err := c.apply([]Option{WithPrefix(prefix)}); err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		b := &Backend{cfg: c}
		l1, l2 := b.LockKey(k1), b.LockKey(k2)
		q1, q2 := b.queuePrefix(k1), b.queuePrefix(k2)
		switch {
		case l1 == l2:
			t.Fatalf("prefix %q: keys %q and %q share the lock key %q", prefix, k1, k2, l1)
		case strings.HasPrefix(q1, q2) || strings.HasPrefix(q2, q1):
			t.Fatalf("prefix %q: waiters of %q (%q) and of %q (%q) overlap", prefix, k1, q1, k2, q2)
		case strings.HasPrefix(l1, q1) || strings.HasPrefix(l1, q2) || strings.HasPrefix(l2, q1) || strings.HasPrefix(l2, q2):
			t.Fatalf("prefix %q: a lock key of %q or %q lies among waiters", prefix, k1, k2)
		}
	})
}
