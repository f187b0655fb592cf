package zookeeper

import (
	"crypto/tls"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// FuzzParseURL: the zookeeper:// URL parser never panics and refuses what
// it cannot use with ErrInvalidURL; what it accepts is one usable
// host:port per server and options that Dial accepts (digest credentials
// with both a user and a password, or none), and the URL written back from
// the settings it read parses to the same settings.
func FuzzParseURL(f *testing.F) {
	urlParser.Fuzz(f,
		"zookeeper://127.0.0.1:2181", "zookeeper://h1,h2:2/app?session_timeout=10s", "zookeeper://[::1]:2181",
		"zookeeper://", "zookeeper://h1,,h2", "zookeeper://:1", "zookeeper://h:0", "zookeeper://h/a/../b",
		"zookeeper://h//", "zookeeper://h?session_timeout=1ns", "zookeeper://u:p@h", "zookeeper://h?x=1",
		"zookeeper:opaque", "zookeeper://h#f", "zookeeper://a]:1", "zookeeper://[fe80::1%25eth0]:1",
		"zookeeper://u:p@h/app", "zookeeper://:p@h", "zookeeper://u:@h", "zookeeper://a%3Ab:p@h", "zookeeper://u:p%40q@h",
		"zookeeper://u@h?password_file=/nonexistent", "zookeeper://h?password_file=/nonexistent",
		"zookeeper://h?tls=on", "zookeeper://h?tls=off", "zookeeper://h?tls=1&server_name=localhost", "zookeeper://h?tls=off&server_name=x",
		"zookeeper://h?ca_file=/nonexistent", "zookeeper://h?cert_file=a", "zookeeper://h?server_name=a%20b", "zookeeper://h?tls=",
		"zookeeper://h?dial_timeout=2s", "zookeeper://h?dial_timeout=0s", "zookeeper://h?dial_timeout=-1s", "zookeeper://h?dial_timeout=x",
	)
}

// urlParser reads zookeeper:// URLs for FuzzParseURL.
var urlParser = urlcheck.Parser[[]string, []Option, config]{
	Parse: parseURL,
	Apply: applyOptions,
	Check: func(t *testing.T, raw string, _ *url.URL, servers []string, cfg config) {
		urlcheck.CheckHostPorts(t, raw, "server", servers...)
		if r, err := cleanRoot(cfg.root); err != nil || r != cfg.root || !strings.HasSuffix(r, DefaultRoot) {
			t.Fatalf("parseURL(%q): root %q is not a clean path ending in %s (%v)", raw, cfg.root, DefaultRoot, err)
		}
		if (cfg.user == "") != (cfg.password == "") || strings.Contains(cfg.user, ":") {
			t.Fatalf("parseURL(%q): digest user %q with a password of %d bytes", raw, cfg.user, len(cfg.password))
		}
		if cfg.dialTimeout <= 0 {
			t.Fatalf("parseURL(%q): dial timeout %v", raw, cfg.dialTimeout)
		}
		if cfg.tls != nil && (cfg.tls.InsecureSkipVerify || cfg.tls.MinVersion < tls.VersionTLS12) {
			t.Fatalf("parseURL(%q): TLS without verification or below 1.2", raw)
		}
	},
	Format: func(_ *url.URL, servers []string, cfg config) string {
		back := url.URL{Scheme: "zookeeper", Host: strings.Join(servers, ","), Path: strings.TrimSuffix(cfg.root, DefaultRoot)}
		if cfg.user != "" {
			back.User = url.UserPassword(cfg.user, cfg.password)
		}
		q := url.Values{"session_timeout": {cfg.timeout.String()}, "dial_timeout": {cfg.dialTimeout.String()}}
		urlcheck.SetTLS(q, cfg.tls)
		back.RawQuery = q.Encode()
		return back.String()
	},
	Differ: func(servers []string, cfg config, servers2 []string, cfg2 config) bool {
		return !slices.Equal(servers, servers2) || cfg.root != cfg2.root || cfg.timeout != cfg2.timeout || cfg.dialTimeout != cfg2.dialTimeout ||
			cfg.user != cfg2.user || cfg.password != cfg2.password || (cfg.tls == nil) != (cfg2.tls == nil) ||
			cfg.tls != nil && cfg.tls.ServerName != cfg2.tls.ServerName
	},
}

// applyOptions applies opts to the configuration Dial starts from.
func applyOptions(opts []Option) (config, error) {
	cfg := config{timeout: DefaultSessionTimeout, dialTimeout: DefaultDialTimeout, root: DefaultRoot}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// FuzzNames: a key's directory is one valid znode name under the root
// ("/" in a key makes no subdirectory, and "." or ".." no path step), two
// different keys never share one, and the escaped name reads back as the
// key.
func FuzzNames(f *testing.F) {
	f.Add("a/b", "a%2Fb")
	f.Add(".", "..")
	f.Add("a", "a/")
	f.Add("%41", "A")
	f.Add("\x00", "\xff")
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		b := &Backend{root: DefaultRoot}
		d1, d2 := b.dir(k1), b.dir(k2)
		for _, d := range []struct{ key, dir string }{{k1, d1}, {k2, d2}} {
			name, ok := strings.CutPrefix(d.dir, DefaultRoot+"/")
			if !ok || name == "" && d.key != "" || strings.Contains(name, "/") || name == "." || name == ".." {
				t.Fatalf("key %q: directory %q is not one znode under %s", d.key, d.dir, DefaultRoot)
			}
			if got, err := url.PathUnescape(name); err != nil || got != d.key {
				t.Fatalf("key %q: znode name %q reads back as %q (%v)", d.key, name, got, err)
			}
		}
		if k1 != k2 && d1 == d2 {
			t.Fatalf("keys %q and %q share the directory %q", k1, k2, d1)
		}
	})
}
