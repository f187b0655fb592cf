package redis

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// TestSentinelURL: what a redis+sentinel:// URL sets: the Sentinels'
// addresses (port 26379 by default), the master set, the database, the
// credentials of the data nodes and, unless sentinel_auth=none, of the
// Sentinels too, TLS for both, and a periodic look at the Sentinels.
func TestSentinelURL(t *testing.T) {
	opt, opts, err := ParseURL("redis+sentinel://u:pw@s1,s2:26380/mymaster/2?prefix=app:&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s1:26379", "s2:26380"}; !slices.Equal(opt.InitAddress, want) {
		t.Errorf("InitAddress = %q, want %q", opt.InitAddress, want)
	}
	if opt.Sentinel.MasterSet != "mymaster" || opt.SelectDB != 2 {
		t.Errorf("master set %q, database %d; want mymaster, 2", opt.Sentinel.MasterSet, opt.SelectDB)
	}
	if opt.Username != "u" || opt.Password != "pw" || opt.Sentinel.Username != "u" || opt.Sentinel.Password != "pw" {
		t.Errorf("credentials %q/%q, of the sentinels %q/%q; want u/pw for both", opt.Username, opt.Password, opt.Sentinel.Username, opt.Sentinel.Password)
	}
	if opt.Sentinel.TopologyRefreshInterval <= 0 || opt.Sentinel.Dialer.Timeout != DefaultDialTimeout || opt.TLSConfig != nil || opt.Sentinel.TLSConfig != nil {
		t.Errorf("refresh %v, sentinel dial timeout %v, TLS %v/%v", opt.Sentinel.TopologyRefreshInterval, opt.Sentinel.Dialer.Timeout, opt.TLSConfig != nil, opt.Sentinel.TLSConfig != nil)
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		t.Fatal(err)
	}
	if cfg.prefix != "app:" || cfg.wait != (waitConfig{replicas: 1, timeout: DefaultWaitTimeout}) {
		t.Errorf("prefix %q, wait %+v", cfg.prefix, cfg.wait)
	}

	opt, _, err = ParseURL("redis+sentinel://u:pw@s1/m?sentinel_auth=none&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if opt.Username != "u" || opt.Password != "pw" || opt.Sentinel.Username != "" || opt.Sentinel.Password != "" || opt.SelectDB != 0 {
		t.Errorf("sentinel_auth=none: credentials %q/%q, of the sentinels %q/%q, database %d", opt.Username, opt.Password, opt.Sentinel.Username, opt.Sentinel.Password, opt.SelectDB)
	}
	if opt.Sentinel.Dialer.Timeout != 2*time.Second {
		t.Errorf("dial_timeout=2s: the sentinels are dialled with %v", opt.Sentinel.Dialer.Timeout)
	}

	opt, _, err = ParseURL("rediss+sentinel://s1,s2/m")
	if err != nil {
		t.Fatal(err)
	}
	if opt.TLSConfig == nil || opt.Sentinel.TLSConfig == nil || opt.DialCtxFn == nil {
		t.Fatal("rediss+sentinel:// without TLS")
	}
	if opt.TLSConfig.ServerName != "" || opt.Sentinel.TLSConfig.ServerName != "" {
		t.Errorf("server names %q/%q: each node's certificate must be checked against the address dialled", opt.TLSConfig.ServerName, opt.Sentinel.TLSConfig.ServerName)
	}

	opt, opts, err = ParseURL("redis://h?wait_replicas=2&wait_timeout=250ms")
	if err != nil {
		t.Fatal(err)
	}
	cfg = defaultConfig()
	if err := cfg.apply(opts); err != nil || cfg.wait != (waitConfig{replicas: 2, timeout: 250 * time.Millisecond}) || opt.Sentinel.MasterSet != "" {
		t.Errorf("wait %+v, %v; master set %q", cfg.wait, err, opt.Sentinel.MasterSet)
	}
}

// TestBadSentinelURLs: a URL that cannot work is refused before anything
// is dialled, with an error that says why and shows no password.
func TestBadSentinelURLs(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"redis+sentinel://u:s3cret@s1", "no master set"},
		{"redis+sentinel://u:s3cret@s1/", "no master set"},
		{"redis+sentinel://u:s3cret@s1/m/x", `database "x"`},
		{"redis+sentinel://u:s3cret@s1/m/-1", `database "-1"`},
		{"redis+sentinel://u:s3cret@s1/m/1/2", `database "1/2"`},
		{"redis+sentinel://u:s3cret@s1/m%20n", "space or control"},
		{"redis+sentinel://u:s3cret@s1/m?sentinel_auth=both", "sentinel_auth"},
		{"redis://u:s3cret@h?sentinel_auth=none", `unknown query parameter "sentinel_auth"`},
		{"redis+sentinel://u:s3cret@s1:0/m", `port "0"`},
		{"redis://u:s3cret@h?wait_replicas=-1", "wait_replicas"},
		{"redis://u:s3cret@h?wait_replicas=x", "wait_replicas"},
		{"redis://u:s3cret@h?wait_replicas=101", "wait_replicas"},
		{"redis://u:s3cret@h?wait_replicas=1&wait_timeout=0s", "wait_timeout"},
		{"redis://u:s3cret@h?wait_replicas=1&wait_timeout=2m", "wait_timeout"},
		{"redis://u:s3cret@h?wait_replicas=1&wait_timeout=soon", "wait_timeout"},
		{"redis://u:s3cret@h?wait_timeout=1s", "without wait_replicas"},
		{"redis://u:s3cret@h?wait_replicas=0&wait_timeout=1s", "without wait_replicas"},
		{"redis://u:s3cret@h1,h2?wait_replicas=1", "Redis Cluster"},
		{"redis+sentinel://u:s3cret@s1/m?wait_timeout=1s", "without wait_replicas"},
	} {
		_, _, err := ParseURL(c.url)
		if !errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidURL", c.url, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseURL(%q) = %q, want it to say %q", c.url, err, c.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q) = %q shows the password", c.url, err)
		}
	}
}
