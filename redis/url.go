package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// DefaultDialTimeout bounds connecting when a URL sets no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// DefaultFlushDelay is how long a client opened from a URL lets commands
// gather after each write to a connection, while other calls are in
// flight (rueidis's MaxFlushDelay), unless the URL sets flush_delay: many
// goroutines' lock calls then leave in one system call instead of one
// each, which saves CPU on both sides. A lone caller is never delayed.
const DefaultFlushDelay = 20 * time.Microsecond

// MaxFlushDelay bounds flush_delay: longer delays cost latency and save
// no more system calls.
const MaxFlushDelay = time.Millisecond

func init() {
	turnstile.Register("redis", open)
	turnstile.Register("rediss", open)
}

// open serves turnstile.Open for
//
//	redis://[user:password@]host[:port][/db][?dial_timeout=5s&prefix=app:&fence_grace=10s&flush_delay=20us]
//	redis://[user:password@]host1:port1,host2:port2,...[?...]
//
// and rediss:// for TLS. The port defaults to 6379, the database to 0.
// Several hosts name nodes of one Redis Cluster: the client learns the
// whole cluster from whichever of them answers first, so the list need
// not be complete, and a cluster has database 0 only. A single host may
// be a cluster node too; the client notices and follows the cluster.
// Independent servers are no cluster: lock on them with package redlock.
// In a list, name IPv6 nodes by host name: net/url refuses bracketed
// IPv6 literals anywhere but alone.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	opt, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, opt, opts...)
}

// urlForm is what redis:// and rediss:// URLs share with those of other
// backends.
var urlForm = storeurl.Form{Schemes: []string{"redis", "rediss"}, Shape: "host:port", Invalid: turnstile.ErrInvalidURL}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (rueidis.ClientOption, []Option, error) {
	var opt rueidis.ClientOption
	var opts []Option
	err := urlForm.Read(u, func(r *storeurl.URL) error {
		// An empty host means localhost, as for a single host.
		addrs, err := r.Hosts("6379", "localhost")
		if err != nil {
			return err
		}
		opt.InitAddress = addrs
		if r.Scheme == "rediss" {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			if len(addrs) == 1 {
				opt.TLSConfig.ServerName, _, _ = net.SplitHostPort(addrs[0])
			} // else crypto/tls checks each node's certificate against the address dialled
		}
		opt.Username, opt.Password = r.Username, r.Password
		if opt.SelectDB, err = r.Database(); err != nil {
			return err
		}
		if opt.SelectDB != 0 && len(addrs) > 1 {
			return fmt.Errorf("database %d: Redis Cluster has database 0 only", opt.SelectDB)
		}
		// Lock scripts never read through a client-side cache; without it
		// the connection skips CLIENT TRACKING.
		opt.DisableCache = true
		opt.Dialer.Timeout = DefaultDialTimeout
		opt.MaxFlushDelay = DefaultFlushDelay
		err = r.Params(map[string]func(string) error{
			"dial_timeout": func(v string) (err error) {
				opt.Dialer.Timeout, err = storeurl.PositiveDuration("dial_timeout", v)
				return err
			},
			"flush_delay": func(v string) error {
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 || d > MaxFlushDelay {
					return fmt.Errorf("flush_delay=%q is not a duration from 0 (off) to %v, such as 20us", v, MaxFlushDelay)
				}
				opt.MaxFlushDelay = d
				return nil
			},
			// RESP2 keeps subscriptions on a connection of their own, for
			// servers that accept no other command on a subscribed
			// connection even under RESP3 (some embedded Redis
			// implementations); the default, 3, multiplexes them.
			"protocol": func(v string) error {
				if v != "2" && v != "3" {
					return fmt.Errorf("protocol=%q: want 2 or 3", v)
				}
				opt.AlwaysRESP2 = v == "2"
				return nil
			},
			"prefix": func(v string) error {
				opts = append(opts, WithPrefix(v))
				return nil
			},
			"fence_grace": func(v string) error {
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("fence_grace=%q is not a duration such as 10s", v)
				}
				opts = append(opts, WithFenceGrace(d))
				return nil
			},
		})
		if err != nil {
			return err
		}
		// Check the options here, so a bad prefix is reported as a bad URL.
		cfg := defaultConfig()
		return cfg.apply(opts)
	})
	if err != nil {
		return rueidis.ClientOption{}, nil, err
	}
	return opt, opts, nil
}
