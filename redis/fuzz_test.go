package redis

import (
	"crypto/tls"
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
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the URL parser (redis://, rediss://, redis+sentinel://,
// rediss+sentinel://) never panics and
// refuses what it cannot use with ErrInvalidURL; what it accepts has
// usable addresses, and the URL written back from the settings it read
// parses to the same settings.
func FuzzParseURL(f *testing.F) {
	ca, cert, key := urlcheck.QueryFiles(testcerts.New(f))
	tlsQuery := "ca_file=" + ca + "&cert_file=" + cert + "&key_file=" + key
	urlParser.Fuzz(f,
		"rediss://u:p@h:1?"+tlsQuery, "redis://h1:1,h2:2?"+tlsQuery+"&server_name=localhost",
		"rediss://h?ca_file="+ca+"&server_name=10.0.0.1", "rediss://h?server_name=a",
		"redis://h?cert_file="+cert, "rediss://h?ca_file="+key,
		"redis://h?server_name=a%20b", "rediss://h?ca_file=", "redis://u@h?password_file=/nonexistent",
		"rediss://[::1]:6380?server_name=::1&ca_file="+ca,
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
	)
}

// urlParser reads the URLs of FuzzParseURL.
var urlParser = urlcheck.Parser[rueidis.ClientOption, []Option, config]{
	Parse: parseURL,
	Apply: func(opts []Option) (c config, err error) { c = defaultConfig(); err = c.apply(opts); return },
	Check: func(t *testing.T, raw string, u *url.URL, opt rueidis.ClientOption, cfg config) {
		scheme := strings.ToLower(u.Scheme)
		if !slices.Contains([]string{"redis", "rediss", "redis+sentinel", "rediss+sentinel"}, scheme) {
			t.Fatalf("parseURL(%q) accepted scheme %q", raw, u.Scheme)
		}
		sentinel := strings.HasSuffix(scheme, "+sentinel")
		if sentinel != (opt.Sentinel.MasterSet != "") {
			t.Fatalf("parseURL(%q): scheme %q, master set %q", raw, scheme, opt.Sentinel.MasterSet)
		}
		if len(opt.InitAddress) == 0 {
			t.Fatalf("%q: no addresses", raw)
		}
		urlcheck.CheckHostPorts(t, raw, "address", opt.InitAddress...)
		if tl := opt.TLSConfig; tl != nil && (tl.InsecureSkipVerify || tl.MinVersion < tls.VersionTLS12 || opt.DialCtxFn == nil) {
			t.Fatalf("%q: TLS without verification, below 1.2, or dialled without hints", raw)
		}
		if cfg.wait.replicas > 0 && len(opt.InitAddress) > 1 && !sentinel {
			t.Fatalf("%q: wait replicas accepted on a Redis Cluster", raw)
		}
		if sentinel && (opt.TLSConfig == nil) != (opt.Sentinel.TLSConfig == nil) {
			t.Fatalf("%q: TLS to the data nodes is %v, to the Sentinels %v", raw, opt.TLSConfig != nil, opt.Sentinel.TLSConfig != nil)
		}
		if strings.HasPrefix(scheme, "rediss") != (opt.TLSConfig != nil) && !urlcheck.TLSParamGiven(u.Query()) {
			t.Fatalf("%q: TLS on is %v", raw, opt.TLSConfig != nil)
		}
	},
	Format: func(u *url.URL, opt rueidis.ClientOption, cfg config) string {
		return formatURL(strings.ToLower(u.Scheme), opt, cfg, u.Query())
	},
	// The TLS settings differ where one trusts or presents different
	// certificates, or verifies the server under another name.
	Differ: func(opt rueidis.ClientOption, cfg config, opt2 rueidis.ClientOption, cfg2 config) bool {
		tl, tl2 := opt.TLSConfig, opt2.TLSConfig
		return !slices.Equal(opt.InitAddress, opt2.InitAddress) || opt.Username != opt2.Username ||
			opt.Password != opt2.Password || opt.SelectDB != opt2.SelectDB ||
			opt.Dialer.Timeout != opt2.Dialer.Timeout || opt.MaxFlushDelay != opt2.MaxFlushDelay ||
			opt.AlwaysRESP2 != opt2.AlwaysRESP2 || (tl == nil) != (tl2 == nil) ||
			cfg.prefix != cfg2.prefix || cfg.grace != cfg2.grace || cfg.wait != cfg2.wait ||
			opt.Sentinel.MasterSet != opt2.Sentinel.MasterSet || opt.Sentinel.Username != opt2.Sentinel.Username ||
			opt.Sentinel.Password != opt2.Sentinel.Password || (opt.Sentinel.TLSConfig == nil) != (opt2.Sentinel.TLSConfig == nil) ||
			tl != nil && (tl.ServerName != tl2.ServerName || (tl.RootCAs == nil) != (tl2.RootCAs == nil) ||
				tl.RootCAs != nil && !tl.RootCAs.Equal(tl2.RootCAs) || len(tl.Certificates) != len(tl2.Certificates))
	},
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
