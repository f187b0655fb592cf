package redlock

import (
	"crypto/tls"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the redlock:// URL parser never panics and refuses what it
// cannot use with ErrInvalidURL; what it accepts is one usable host:port
// per node, and the URL written back from the settings it read parses to
// the same settings.
func FuzzParseURL(f *testing.F) {
	ca, cert, key := urlcheck.QueryFiles(testcerts.New(f))
	urlParser.Fuzz(f,
		"redlock://u:p@h1,h2,h3?ca_file="+ca+"&cert_file="+cert+"&key_file="+key,
		"redlock://h1,h2?tls=on", "redlock://h1,h2?tls=off", "redlock://h1?tls=TRUE&server_name=localhost",
		"redlock://h1?tls=off&ca_file="+ca, "redlock://h1?tls=maybe", "redlock://h1?key_file="+key,
		"redlock://h1?server_name=a%20b", "redlock://h1?ca_file="+key, "redlock://u@h1?password_file=/nonexistent",
		"redlock://h1:1,h2:2,h3:3", "redlock://[::1]:6379", "redlock://[::1]", "redlock://[fe80::1%25eth0]:7",
		"redlock://u:p@h1,h2/3?node_timeout=50ms&quarantine=0s&fencing=off&prefix=app:&fence_grace=1s&dial_timeout=1s&flush_delay=0",
		"redlock://", "redlock://h1,,h2", "redlock://:1", "redlock://h:0", "redlock://h:x", "redlock://h/-1",
		"redlock://h?fencing=maybe", "redlock://h?prefix=a{b", "redlock://h?node_timeout=1ns", "redlock://h#f",
		"redlock:opaque", "redlock://h?x=1", "redlock://h1:1,[::1]:2", "redlock://a]:1", "redlock://h?fence_grace=x",
	)
}

// nodes is what parseURL reads for the nodes' clients: their addresses
// and the options they share.
type nodes struct {
	addrs []string
	opt   rueidis.ClientOption
}

// urlParser reads redlock:// URLs for FuzzParseURL.
var urlParser = urlcheck.Parser[nodes, []Option, config]{
	Parse: func(u *url.URL) (nodes, []Option, error) {
		addrs, opt, opts, err := parseURL(u)
		return nodes{addrs, opt}, opts, err
	},
	Apply: func(opts []Option) (c config, err error) { c = defaultConfig(); err = c.apply(opts); return },
	Check: func(t *testing.T, raw string, u *url.URL, n nodes, _ config) {
		if want := strings.Count(u.Host, ",") + 1; len(n.addrs) != want {
			t.Fatalf("parseURL(%q) = %q: %d addresses for %d nodes", raw, n.addrs, len(n.addrs), want)
		}
		urlcheck.CheckHostPorts(t, raw, "node address", n.addrs...)
		q := u.Query()
		// An accepted tls= is on or off.
		wantTLS := urlcheck.TLSParamGiven(q) || q.Has("tls") && !isOff(q.Get("tls"))
		if (n.opt.TLSConfig != nil) != wantTLS || (n.opt.DialCtxFn != nil) != wantTLS {
			t.Fatalf("%q: TLS %v, dial hook %v; want %v", raw, n.opt.TLSConfig != nil, n.opt.DialCtxFn != nil, wantTLS)
		}
		if tl := n.opt.TLSConfig; tl != nil && (tl.InsecureSkipVerify || tl.MinVersion < tls.VersionTLS12 || tl.ServerName != q.Get("server_name")) {
			t.Fatalf("%q makes unverified TLS, or TLS under another server name", raw)
		}
	},
	Format: func(u *url.URL, n nodes, cfg config) string { return formatURL(n.addrs, n.opt, cfg, u.Query()) },
	// The TLS settings differ where one trusts or presents different
	// certificates, or verifies the servers under another name.
	Differ: func(n nodes, cfg config, n2 nodes, cfg2 config) bool {
		opt, opt2 := n.opt, n2.opt
		tl, tl2 := opt.TLSConfig, opt2.TLSConfig
		return !slices.Equal(n.addrs, n2.addrs) || opt.Username != opt2.Username || opt.Password != opt2.Password ||
			opt.SelectDB != opt2.SelectDB || opt.Dialer.Timeout != opt2.Dialer.Timeout ||
			opt.MaxFlushDelay != opt2.MaxFlushDelay || cfg.nodeTimeout != cfg2.nodeTimeout ||
			cfg.quarantine != cfg2.quarantine || cfg.fencing != cfg2.fencing || len(cfg.nodeOpts) != len(cfg2.nodeOpts) ||
			(tl == nil) != (tl2 == nil) || tl != nil && (tl.ServerName != tl2.ServerName || (tl.RootCAs == nil) != (tl2.RootCAs == nil) ||
			tl.RootCAs != nil && !tl.RootCAs.Equal(tl2.RootCAs) || len(tl.Certificates) != len(tl2.Certificates))
	},
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
