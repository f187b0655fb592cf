package redlock

import (
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// FuzzParseURL: the redlock:// URL parser never panics and refuses what it
// cannot use with ErrInvalidURL; what it accepts is one usable host:port
// per node, and the URL written back from the settings it read parses to
// the same settings.
func FuzzParseURL(f *testing.F) {
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
	})
}

// formatURL writes the settings parseURL read as a URL; the node options
// (prefix, fence_grace), which are functions, are copied from the query
// from.
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
	for _, k := range []string{"prefix", "fence_grace"} {
		if v, ok := from[k]; ok {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
