package redis

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
	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// FuzzParseURL: the URL parser (redis://, rediss://, redis+sentinel://,
// rediss+sentinel://) never panics and
// refuses what it cannot use with ErrInvalidURL; what it accepts has
// usable addresses, and the URL written back from the settings it read
// parses to the same settings.
func FuzzParseURL(f *testing.F) {
	certs := testcerts.New(f)
	tlsQuery := "ca_file=" + url.QueryEscape(certs.CA) + "&cert_file=" + url.QueryEscape(certs.ClientCert) + "&key_file=" + url.QueryEscape(certs.ClientKey)
	for _, s := range []string{
		"rediss://u:p@h:1?" + tlsQuery, "redis://h1:1,h2:2?" + tlsQuery + "&server_name=localhost",
		"rediss://h?ca_file=" + url.QueryEscape(certs.CA) + "&server_name=10.0.0.1", "rediss://h?server_name=a",
		"redis://h?cert_file=" + url.QueryEscape(certs.ClientCert), "rediss://h?ca_file=" + url.QueryEscape(certs.ClientKey),
		"redis://h?server_name=a%20b", "rediss://h?ca_file=", "redis://u@h?password_file=/nonexistent",
		"rediss://[::1]:6380?server_name=::1&ca_file=" + url.QueryEscape(certs.CA),
	} {
		f.Add(s)
	}
	for _, s := range []string{
		"redis://127.0.0.1:6379", "rediss://u:p@host:1/2?prefix=app:&fence_grace=1s",
		"redis://[::1]:6379", "redis://h1:1,h2:2,[::1]:3", "redis://", "redis:///3",
		"redis://h?dial_timeout=1s&flush_delay=0&protocol=2", "redis://h?prefix=a{b",
		"redis://h?x=1", "redis://h/-1", "redis://h:0", "redis://h#f", "redis:opaque",
		"REDIS://H", "redis://h?prefix=a&prefix=b", "redis://h1,h2/1", "redis://:@h",
		"redis://h?fence_grace=0s", "redis://h?flush_delay=2ms", "redis://a]:1",
		"redis://h?wait_replicas=1", "redis://h?wait_replicas=2&wait_timeout=50ms", "redis://h?wait_replicas=-1",
		"redis://h?wait_replicas=x", "redis://h?wait_timeout=1s", "redis://h1,h2?wait_replicas=1", "redis://h?wait_replicas=0&wait_timeout=1s",
		"redis+sentinel://s1:26379,s2,s3:1/mymaster", "redis+sentinel://u:p@s1/m/3?wait_replicas=1&sentinel_auth=none",
		"rediss+sentinel://u:p@s1,s2/m?server_name=x", "redis+sentinel://s1", "redis+sentinel://s1/", "redis+sentinel://s1/m/x",
		"redis+sentinel://s1/m%20n", "redis+sentinel://s1/m/1/2", "redis+sentinel://s1/m?sentinel_auth=other", "redis?sentinel://h",
		"REDIS+SENTINEL://S/M", "redis+sentinel://s1/m?wait_replicas=1&wait_timeout=0s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return // Open refuses it before any backend sees it
		}
		opt, opts, err := parseURL(u)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v; want ErrInvalidURL", raw, err)
			}
			return
		}
		scheme := strings.ToLower(u.Scheme)
		if !slices.Contains([]string{"redis", "rediss", "redis+sentinel", "rediss+sentinel"}, scheme) {
			t.Fatalf("parseURL(%q) accepted scheme %q", raw, u.Scheme)
		}
		sentinel := strings.HasSuffix(scheme, "+sentinel")
		if sentinel != (opt.Sentinel.MasterSet != "") {
			t.Fatalf("parseURL(%q): scheme %q, master set %q", raw, scheme, opt.Sentinel.MasterSet)
		}
		checkAddrs(t, raw, opt.InitAddress)
		cfg := defaultConfig()
		if err := cfg.apply(opts); err != nil {
			t.Fatalf("parseURL(%q) accepted options that fail: %v", raw, err)
		}
		back := formatURL(scheme, opt, cfg, u.Query())
		u2, err := url.Parse(back)
		if err != nil {
			t.Fatalf("parseURL(%q) read settings that %q writes back, which does not parse: %v", raw, back, err)
		}
		opt2, opts2, err := parseURL(u2)
		if err != nil {
			t.Fatalf("parseURL(%q) read settings that %q writes back, which it refuses: %v", raw, back, err)
		}
		cfg2 := defaultConfig()
		if err := cfg2.apply(opts2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(opt.InitAddress, opt2.InitAddress) || opt.Username != opt2.Username ||
			opt.Password != opt2.Password || opt.SelectDB != opt2.SelectDB ||
			opt.Dialer.Timeout != opt2.Dialer.Timeout || opt.MaxFlushDelay != opt2.MaxFlushDelay ||
			opt.AlwaysRESP2 != opt2.AlwaysRESP2 || (opt.TLSConfig == nil) != (opt2.TLSConfig == nil) ||
			cfg.prefix != cfg2.prefix || cfg.grace != cfg2.grace || cfg.wait != cfg2.wait ||
			opt.Sentinel.MasterSet != opt2.Sentinel.MasterSet || opt.Sentinel.Username != opt2.Sentinel.Username ||
			opt.Sentinel.Password != opt2.Sentinel.Password || (opt.Sentinel.TLSConfig == nil) != (opt2.Sentinel.TLSConfig == nil) {
			t.Fatalf("%q and its settings written back as %q parse differently", raw, back)
		}
		if opt.TLSConfig != nil && opt.TLSConfig.ServerName != opt2.TLSConfig.ServerName {
			t.Fatalf("%q: TLS server name %q, written back as %q: %q", raw, opt.TLSConfig.ServerName, back, opt2.TLSConfig.ServerName)
		}
		if tl := opt.TLSConfig; tl != nil {
			if tl.InsecureSkipVerify || tl.MinVersion < tls.VersionTLS12 || opt.DialCtxFn == nil {
				t.Fatalf("%q: TLS without verification, below 1.2, or dialled without hints", raw)
			}
			if (tl.RootCAs == nil) != (opt2.TLSConfig.RootCAs == nil) || tl.RootCAs != nil && !tl.RootCAs.Equal(opt2.TLSConfig.RootCAs) ||
				len(tl.Certificates) != len(opt2.TLSConfig.Certificates) {
				t.Fatalf("%q and its settings written back as %q trust or present different certificates", raw, back)
			}
		}
		if cfg.wait.replicas > 0 && len(opt.InitAddress) > 1 && !sentinel {
			t.Fatalf("%q: wait replicas accepted on a Redis Cluster", raw)
		}
		if sentinel && (opt.TLSConfig == nil) != (opt.Sentinel.TLSConfig == nil) {
			t.Fatalf("%q: TLS to the data nodes is %v, to the Sentinels %v", raw, opt.TLSConfig != nil, opt.Sentinel.TLSConfig != nil)
		}
		if strings.HasPrefix(scheme, "rediss") != (opt.TLSConfig != nil) && !tlsParamGiven(u.Query()) {
			t.Fatalf("%q: TLS on is %v", raw, opt.TLSConfig != nil)
		}
	})
}

// checkAddrs fails t unless every address is host:port with a host and a
// port in [1, 65535].
func checkAddrs(t *testing.T, raw string, addrs []string) {
	t.Helper()
	if len(addrs) == 0 {
		t.Fatalf("%q: no addresses", raw)
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			t.Fatalf("%q: address %q is not host:port (%v)", raw, a, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			t.Fatalf("%q: address %q has port %q", raw, a, port)
		}
	}
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

// formatURL writes the settings parseURL read as a URL, with the TLS
// parameters of q, whose files opt does not name.
func formatURL(scheme string, opt rueidis.ClientOption, cfg config, q0 url.Values) string {
	u := url.URL{Scheme: scheme, Host: strings.Join(opt.InitAddress, ",")}
	if opt.Username != "" || opt.Password != "" {
		u.User = url.UserPassword(opt.Username, opt.Password)
	}
	switch {
	case opt.Sentinel.MasterSet != "":
		u.Path = "/" + opt.Sentinel.MasterSet + "/" + strconv.Itoa(opt.SelectDB)
	case opt.SelectDB != 0:
		u.Path = "/" + strconv.Itoa(opt.SelectDB)
	}
	q := url.Values{}
	if opt.Sentinel.MasterSet != "" && opt.Sentinel.Password == "" && opt.Sentinel.Username == "" {
		q.Set("sentinel_auth", "none")
	}
	if cfg.wait.replicas > 0 {
		q.Set("wait_replicas", strconv.Itoa(cfg.wait.replicas))
		q.Set("wait_timeout", cfg.wait.timeout.String())
	}
	q.Set("dial_timeout", opt.Dialer.Timeout.String())
	q.Set("flush_delay", opt.MaxFlushDelay.String())
	if opt.AlwaysRESP2 {
		q.Set("protocol", "2")
	}
	if cfg.prefix != "" {
		q.Set("prefix", cfg.prefix)
	}
	q.Set("fence_grace", cfg.grace.String())
	for _, p := range storeurl.TLSParamNames {
		if q0.Has(p) {
			q.Set(p, q0.Get(p))
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// allNames lists every Redis key and channel the backend with prefix
// uses for key, and the guard key of package fence beside them.
func allNames(prefix, key string) []string {
	b := &Backend{cfg: config{prefix: prefix}}
	n := b.names(key)
	all := []string{n.lock, n.fence, n.channel, b.GuardKey(key)}
	for _, s := range rediskeys.Reserved() {
		switch s {
		case rediskeys.Lock, rediskeys.Fence, rediskeys.Released, rediskeys.Guard, rediskeys.Started:
			continue // above, or a slot's marker rather than a lock's key
		}
		all = append(all, n.kindKey(s))
	}
	return all
}

// FuzzNames: no two different (prefix, key) pairs share a Redis key or
// channel, whichever of the lock's names (lock, fence, channel, guard,
// the kinds' keys) each is; the names of one lock differ from each other and
// share its Redis Cluster slot; and no name is a restart marker.
func FuzzNames(f *testing.F) {
	f.Add("", "k", "", "k2")
	f.Add("", "}x", "", `\}x`)
	f.Add("", `\x`, "", "x")
	f.Add("app:", "k", "app:", "k}:queue")
	f.Add("", "k}:queue", "", "k")
	f.Add("a", "b", "", "ab")
	f.Add("", "x}", "", "x")
	f.Add("p", "k:queue", "p", "k")
	f.Add("", "{", "", "}")
	f.Fuzz(func(t *testing.T, p1, k1, p2, k2 string) {
		for _, pk := range [][2]string{{p1, k1}, {p2, k2}} {
			if pk[1] == "" || len(pk[1]) > turnstile.MaxKeyLen || CheckOptions(WithPrefix(pk[0])) != nil {
				return // refused before any name is made
			}
		}
		n1, n2 := allNames(p1, k1), allNames(p2, k2)
		for i, a := range n1 {
			if slot := clusterslot.Of(a); slot != clusterslot.Of(n1[0]) {
				t.Fatalf("prefix %q key %q: %q is in slot %d, the lock %q in %d", p1, k1, a, slot, n1[0], clusterslot.Of(n1[0]))
			}
			if slices.Index(n1, a) != i {
				t.Fatalf("prefix %q key %q: name %q used twice", p1, k1, a)
			}
			if strings.HasSuffix(a, "}:started") {
				t.Fatalf("prefix %q key %q: name %q looks like a restart marker", p1, k1, a)
			}
		}
		if p1 == p2 && k1 == k2 {
			return
		}
		for _, a := range n1 {
			if slices.Contains(n2, a) {
				t.Fatalf("(prefix %q, key %q) and (prefix %q, key %q) both use %q", p1, k1, p2, k2, a)
			}
		}
	})
}
