package redlock

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// FuzzParseURL: the redlock:// URL parser never panics and refuses what it
// cannot use with ErrInvalidURL; what it accepts is one usable host:port
// per node, and the URL written back from the settings it read parses to
// the same settings.
func FuzzParseURL(f *testing.F) {
	certs := testcerts.New(f)
	ca, cert, key := url.QueryEscape(certs.CA), url.QueryEscape(certs.ClientCert), url.QueryEscape(certs.ClientKey)
	for _, s := range []string{
		"redlock://u:p@h1,h2,h3?ca_file=" + ca + "&cert_file=" + cert + "&key_file=" + key,
		"redlock://h1,h2?tls=on", "redlock://h1,h2?tls=off", "redlock://h1?tls=TRUE&server_name=localhost",
		"redlock://h1?tls=off&ca_file=" + ca, "redlock://h1?tls=maybe", "redlock://h1?key_file=" + key,
		"redlock://h1?server_name=a%20b", "redlock://h1?ca_file=" + key, "redlock://u@h1?password_file=/nonexistent",
	} {
		f.Add(s)
	}
	for _, s := range []string{
		"redlock://h1:1,h2:2,h3:3", "redlock://[::1]:6379", "redlock://[::1]", "redlock://[fe80::1%25eth0]:7",
		"redlock://u:p@h1,h2/3?node_timeout=50ms&quarantine=0s&fencing=off&prefix=app:&fence_grace=1s&dial_timeout=1s&flush_delay=0",
		"redlock://", "redlock://h1,,h2", "redlock://:1", "redlock://h:0", "redlock://h:x", "redlock://h/-1",
		"redlock://h?fencing=maybe", "redlock://h?prefix=a{b", "redlock://h?node_timeout=1ns", "redlock://h#f",
		"redlock:opaque", "redlock://h?x=1", "redlock://h1:1,[::1]:2", "redlock://a]:1", "redlock://h?fence_grace=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return // Open refuses it before any backend sees it
		}
		addrs, opt, opts, err := parseURL(u)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v; want ErrInvalidURL", raw, err)
			}
			return
		}
		if n := strings.Count(u.Host, ",") + 1; len(addrs) != n {
			t.Fatalf("parseURL(%q) = %q: %d addresses for %d nodes", raw, addrs, len(addrs), n)
		}
		for _, a := range addrs {
			host, port, err := net.SplitHostPort(a)
			if err != nil || host == "" || strings.ContainsAny(host, "[]") {
				t.Fatalf("parseURL(%q): node address %q is not host:port (%v)", raw, a, err)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				t.Fatalf("parseURL(%q): node address %q has port %q", raw, a, port)
			}
		}
		cfg := defaultConfig()
		if err := cfg.apply(opts); err != nil {
			t.Fatalf("parseURL(%q) accepted options that fail: %v", raw, err)
		}
		back := formatURL(addrs, opt, cfg, u.Query())
		u2, err := url.Parse(back)
		if err != nil {
			t.Fatalf("parseURL(%q) read settings that %q writes back, which does not parse: %v", raw, back, err)
		}
		addrs2, opt2, opts2, err := parseURL(u2)
		if err != nil {
			t.Fatalf("parseURL(%q) read settings that %q writes back, which it refuses: %v", raw, back, err)
		}
		cfg2 := defaultConfig()
		if err := cfg2.apply(opts2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(addrs, addrs2) || opt.Username != opt2.Username || opt.Password != opt2.Password ||
			opt.SelectDB != opt2.SelectDB || opt.Dialer.Timeout != opt2.Dialer.Timeout ||
			opt.MaxFlushDelay != opt2.MaxFlushDelay || cfg.nodeTimeout != cfg2.nodeTimeout ||
			cfg.quarantine != cfg2.quarantine || cfg.fencing != cfg2.fencing || len(cfg.nodeOpts) != len(cfg2.nodeOpts) {
			t.Fatalf("%q and its settings written back as %q parse differently", raw, back)
		}
		q := u.Query()
		// An accepted tls= is on or off.
		wantTLS := tlsParamGiven(q) || q.Has("tls") && !isOff(q.Get("tls"))
		if (opt.TLSConfig != nil) != wantTLS || (opt2.TLSConfig != nil) != wantTLS || (opt.DialCtxFn != nil) != wantTLS {
			t.Fatalf("%q: TLS %v, written back as %q: %v; want %v", raw, opt.TLSConfig != nil, back, opt2.TLSConfig != nil, wantTLS)
		}
		if tl, tl2 := opt.TLSConfig, opt2.TLSConfig; tl != nil {
			if tl.InsecureSkipVerify || tl.MinVersion < tls.VersionTLS12 || tl.ServerName != q.Get("server_name") ||
				tl.ServerName != tl2.ServerName || (tl.RootCAs == nil) != (tl2.RootCAs == nil) ||
				tl.RootCAs != nil && !tl.RootCAs.Equal(tl2.RootCAs) || len(tl.Certificates) != len(tl2.Certificates) {
				t.Fatalf("%q and its settings written back as %q make different or unverified TLS", raw, back)
			}
		}
	})
}

// tlsParamGiven reports whether q sets one of the TLS parameters.
func tlsParamGiven(q url.Values) bool {
	for _, p := range storeurl.TLSParamNames {
		if q.Has(p) {
			return true
		}
	}
	return false
}

// isOff reports whether v says off.
func isOff(v string) bool {
	on, err := storeurl.OnOff(v)
	return err == nil && !on
}

// formatURL writes the settings parseURL read as a URL; the node options
// (prefix, fence_grace), which are functions, and the TLS parameters,
// whose files opt does not name, are copied from the query from.
func formatURL(addrs []string, opt rueidis.ClientOption, cfg config, from url.Values) string {
	u := url.URL{Scheme: "redlock", Host: strings.Join(addrs, ",")}
	if opt.Username != "" || opt.Password != "" {
		u.User = url.UserPassword(opt.Username, opt.Password)
	}
	if opt.SelectDB != 0 {
		u.Path = "/" + strconv.Itoa(opt.SelectDB)
	}
	q := url.Values{}
	q.Set("dial_timeout", opt.Dialer.Timeout.String())
	q.Set("flush_delay", opt.MaxFlushDelay.String())
	q.Set("node_timeout", cfg.nodeTimeout.String())
	q.Set("quarantine", cfg.quarantine.String())
	if !cfg.fencing {
		q.Set("fencing", "off")
	}
	if opt.TLSConfig != nil {
		q.Set("tls", "on")
	}
	for _, k := range append([]string{"prefix", "fence_grace"}, storeurl.TLSParamNames...) {
		if v, ok := from[k]; ok {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
