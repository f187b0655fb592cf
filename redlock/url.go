package redlock

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
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

// urlForm is what redlock:// URLs share with those of other backends.
var urlForm = storeurl.Form{Schemes: []string{"redlock"}, Shape: "host1:port1,host2:port2,...", Invalid: turnstile.ErrInvalidURL}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) ([]string, rueidis.ClientOption, []Option, error) {
	var addrs []string
	var opt rueidis.ClientOption
	var opts []Option
	err := urlForm.Read(u, func(r *storeurl.URL) (err error) {
		if u.Host == "" {
			return fmt.Errorf("no nodes: want redlock://%s", urlForm.Shape)
		}
		if addrs, err = r.Hosts("6379", ""); err != nil {
			return err
		}
		opt.Username, opt.Password = r.Username, r.Password
		if opt.SelectDB, err = r.Database(); err != nil {
			return err
		}
		opt.Dialer.Timeout = DefaultDialTimeout
		opt.MaxFlushDelay = redis.DefaultFlushDelay

		var nodeOpts []redis.Option
		// duration reads a duration and hands it to set.
		duration := func(name string, set func(time.Duration) error) func(string) error {
			return func(v string) error {
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("%s=%q is not a duration such as 50ms", name, v)
				}
				return set(d)
			}
		}
		err = r.Params(map[string]func(string) error{
			"node_timeout": duration("node_timeout", func(d time.Duration) error {
				opts = append(opts, WithNodeTimeout(d))
				return nil
			}),
			"quarantine": duration("quarantine", func(d time.Duration) error {
				opts = append(opts, WithRestartQuarantine(d))
				return nil
			}),
			"fence_grace": duration("fence_grace", func(d time.Duration) error {
				nodeOpts = append(nodeOpts, redis.WithFenceGrace(d))
				return nil
			}),
			"dial_timeout": duration("dial_timeout", func(d time.Duration) error {
				if d <= 0 {
					return fmt.Errorf("dial_timeout=%v is not positive", d)
				}
				opt.Dialer.Timeout = d
				return nil
			}),
			"flush_delay": duration("flush_delay", func(d time.Duration) error {
				if d < 0 || d > redis.MaxFlushDelay {
					return fmt.Errorf("flush_delay=%v is not from 0 (off) to %v", d, redis.MaxFlushDelay)
				}
				opt.MaxFlushDelay = d
				return nil
			}),
			"fencing": func(v string) error {
				switch strings.ToLower(v) {
				case "on", "true", "1":
				case "off", "false", "0":
					opts = append(opts, WithoutFencing())
				default:
					return fmt.Errorf("fencing=%q is not on or off", v)
				}
				return nil
			},
			"prefix": func(v string) error {
				nodeOpts = append(nodeOpts, redis.WithPrefix(v))
				return nil
			},
		})
		if err != nil {
			return err
		}
		if len(nodeOpts) > 0 {
			opts = append(opts, WithNodeOptions(nodeOpts...))
		}
		// Check every option here, so that a bad value is reported as a
		// bad URL before anything is dialled.
		cfg := defaultConfig()
		if err := cfg.apply(opts); err != nil {
			return err
		}
		return redis.CheckOptions(nodeOpts...)
	})
	if err != nil {
		return nil, rueidis.ClientOption{}, nil, err
	}
	return addrs, opt, opts, nil
}
