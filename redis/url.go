package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/hostlist"
	"github.com/turnstilelock/turnstile/internal/redact"
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

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (rueidis.ClientOption, []Option, error) {
	a, b, err := readURL(u)
	if err != nil {
		var zero rueidis.ClientOption
		return zero, nil, redact.Error(err, u.String())
	}
	return a, b, nil
}

func readURL(u *url.URL) (rueidis.ClientOption, []Option, error) {
	var opt rueidis.ClientOption
	bad := func(format string, a ...any) (rueidis.ClientOption, []Option, error) {
		return opt, nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "redis" && scheme != "rediss" {
		return bad("scheme %q is not redis or rediss", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want %s://host:port, got %s", scheme, redact.URL(u.String()))
	}
	if u.Fragment != "" {
		return bad("unexpected fragment #%s", u.Fragment)
	}

	addrs, err := parseHosts(u.Host)
	if err != nil {
		return opt, nil, err
	}
	opt.InitAddress = addrs
	if scheme == "rediss" {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if len(addrs) == 1 {
			opt.TLSConfig.ServerName, _, _ = net.SplitHostPort(addrs[0])
		} // else crypto/tls checks each node's certificate against the address dialled
	}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return bad("database %q in the path is not a non-negative number", db)
		}
		if n != 0 && len(addrs) > 1 {
			return bad("database %d: Redis Cluster has database 0 only", n)
		}
		opt.SelectDB = n
	}
	// Lock scripts never read through a client-side cache; without it the
	// connection skips CLIENT TRACKING.
	opt.DisableCache = true
	opt.Dialer.Timeout = DefaultDialTimeout
	opt.MaxFlushDelay = DefaultFlushDelay

	var opts []Option
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return bad("query parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("dial_timeout=%q is not a positive duration such as 5s", v)
			}
			opt.Dialer.Timeout = d
		case "flush_delay":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > MaxFlushDelay {
				return bad("flush_delay=%q is not a duration from 0 (off) to %v, such as 20us", v, MaxFlushDelay)
			}
			opt.MaxFlushDelay = d
		case "protocol":
			// RESP2 keeps subscriptions on a connection of their own, for
			// servers that accept no other command on a subscribed
			// connection even under RESP3 (some embedded Redis
			// implementations); the default, 3, multiplexes them.
			switch v {
			case "2":
				opt.AlwaysRESP2 = true
			case "3":
			default:
				return bad("protocol=%q: want 2 or 3", v)
			}
		case "prefix":
			opts = append(opts, WithPrefix(v))
		case "fence_grace":
			d, err := time.ParseDuration(v)
			if err != nil {
				return bad("fence_grace=%q is not a duration such as 10s", v)
			}
			opts = append(opts, WithFenceGrace(d))
		default:
			return bad("unknown query parameter %q (known: dial_timeout, flush_delay, protocol, prefix, fence_grace)", name)
		}
	}
	// Check the options here, so a bad prefix is reported as a bad URL.
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return opt, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, err)
	}
	return opt, opts, nil
}

// parseHosts splits the host part of a URL, host[:port][,host[:port]...],
// into addresses. An empty host means localhost, as for a single host.
func parseHosts(hosts string) ([]string, error) {
	addrs, err := hostlist.Split(hosts, "6379", "localhost")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", turnstile.ErrInvalidURL, err)
	}
	return addrs, nil
}
