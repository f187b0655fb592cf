package redlock

import (
	"context"
	"errors"
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

// urlForm is what redlock:// URLs share with those of other backends.
var urlForm = storeurl.Form{Schemes: []string{"redlock"}, Shape: "host1:port1,host2:port2,...", Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.Register("redlock", open)
}

// open serves turnstile.Open for
//
//	redlock://[user:password@]host1[:port1],host2[:port2],...[/db][?node_timeout=50ms&quarantine=35s&fencing=on&prefix=app:&fence_grace=10s&dial_timeout=5s&flush_delay=20us]
//
// Ports default to 6379, the database to 0; user, password and database
// apply to every node. Hosts are names, IPv4 addresses or bracketed IPv6
// addresses ([::1]:6379).
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
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (addrs []string, opt rueidis.ClientOption, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) (err error) {
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
		fencing := true
		if err := r.Params(map[string]storeurl.Param{
			"node_timeout": storeurl.Append(&opts, storeurl.Duration, WithNodeTimeout),
			"quarantine":   storeurl.Append(&opts, storeurl.Duration, WithRestartQuarantine),
			"fencing":      storeurl.Store(&fencing, onOff),
			"prefix":       storeurl.Append(&nodeOpts, storeurl.String, redis.WithPrefix),
			"fence_grace":  storeurl.Append(&nodeOpts, storeurl.Duration, redis.WithFenceGrace),
			"dial_timeout": storeurl.Store(&opt.Dialer.Timeout, storeurl.PositiveDuration),
			"flush_delay":  storeurl.Store(&opt.MaxFlushDelay, storeurl.DurationIn(0, redis.MaxFlushDelay, "20us")),
		}); err != nil {
			return err
		}
		if !fencing {
			opts = append(opts, WithoutFencing())
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
	return addrs, opt, opts, err
}

// onOff reads fencing=on or off (also true, false, 1, 0, in any case).
func onOff(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, errors.New("is not on or off")
}
