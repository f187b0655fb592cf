package redlock

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/hostlist"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/redis"
)

// DefaultDialTimeout bounds connecting to each node when a URL sets no
// dial_timeout.
const DefaultDialTimeout = 5 * time.Second

func init() {
	turnstile.Register("redlock", open)
}

// open serves turnstile.Open for
//
//	redlock://[user:password@]host1[:port1],host2[:port2],...[/db][?node_timeout=50ms&quarantine=35s&fencing=on&prefix=app:&fence_grace=10s&dial_timeout=5s&flush_delay=20us]
//
// Ports default to 6379, the database to 0; user, password and database
// apply to every node. Hosts are names or IPv4 addresses; a lone node may
// be a bracketed IPv6 address (url.Parse refuses them in a list).
// flush_delay is each node client's write batching, as for redis://
// (default redis.DefaultFlushDelay, 0 off).
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	addrs, opt, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, addrs, opt, opts...)
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) ([]string, rueidis.ClientOption, []Option, error) {
	a, b, c, err := readURL(u)
	if err != nil {
		var zero rueidis.ClientOption
		return nil, zero, nil, redact.Error(err, u.String())
	}
	return a, b, c, nil
}

func readURL(u *url.URL) ([]string, rueidis.ClientOption, []Option, error) {
	var opt rueidis.ClientOption
	bad := func(format string, a ...any) ([]string, rueidis.ClientOption, []Option, error) {
		return nil, opt, nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	if !strings.EqualFold(u.Scheme, "redlock") {
		return bad("scheme %q is not redlock", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want redlock://host1:port1,host2:port2,..., got %s", redact.URL(u.String()))
	}
	if u.Fragment != "" {
		return bad("unexpected fragment #%s", u.Fragment)
	}
	if u.Host == "" {
		return bad("no nodes: want redlock://host1:port1,host2:port2,...")
	}
	addrs, err := hostlist.Split(u.Host, "6379", "")
	if err != nil {
		return bad("%v", err)
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
		opt.SelectDB = n
	}
	opt.Dialer.Timeout = DefaultDialTimeout
	opt.MaxFlushDelay = redis.DefaultFlushDelay

	var opts []Option
	var nodeOpts []redis.Option
	duration := func(name, v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s=%q is not a duration such as 50ms", turnstile.ErrInvalidURL, name, v)
		}
		return d, nil
	}
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return bad("query parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "node_timeout", "quarantine", "fence_grace", "dial_timeout", "flush_delay":
			d, err := duration(name, v)
			if err != nil {
				return nil, opt, nil, err
			}
			switch name {
			case "node_timeout":
				opts = append(opts, WithNodeTimeout(d))
			case "quarantine":
				opts = append(opts, WithRestartQuarantine(d))
			case "fence_grace":
				nodeOpts = append(nodeOpts, redis.WithFenceGrace(d))
			case "dial_timeout":
				if d <= 0 {
					return bad("dial_timeout=%q is not positive", v)
				}
				opt.Dialer.Timeout = d
			case "flush_delay":
				if d < 0 || d > redis.MaxFlushDelay {
					return bad("flush_delay=%q is not from 0 (off) to %v", v, redis.MaxFlushDelay)
				}
				opt.MaxFlushDelay = d
			}
		case "fencing":
			switch strings.ToLower(v) {
			case "on", "true", "1":
			case "off", "false", "0":
				opts = append(opts, WithoutFencing())
			default:
				return bad("fencing=%q is not on or off", v)
			}
		case "prefix":
			nodeOpts = append(nodeOpts, redis.WithPrefix(v))
		default:
			return bad("unknown query parameter %q (known: node_timeout, quarantine, fencing, prefix, fence_grace, dial_timeout, flush_delay)", name)
		}
	}
	if len(nodeOpts) > 0 {
		opts = append(opts, WithNodeOptions(nodeOpts...))
	}
	// Check every option here, so that a bad value is reported as a bad
	// URL before anything is dialled.
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, opt, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, err)
	}
	if err := redis.CheckOptions(nodeOpts...); err != nil {
		return nil, opt, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, err)
	}
	return addrs, opt, opts, nil
}
