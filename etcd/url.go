package etcd

import (
	"context"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// DefaultDialTimeout bounds connecting when a URL sets no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

func init() {
	turnstile.Register("etcd", open)
}

// open serves turnstile.Open for
//
//	etcd://[user:password@]host[:port][,host[:port]...][?prefix=/turnstile/&dial_timeout=5s]
//
// The port defaults to 2379. Several hosts are members of one cluster.
// The client speaks plain HTTP/2 (no TLS); for TLS build a clientv3.Config
// and call Dial. In a list, name IPv6 members by host name: net/url
// refuses bracketed IPv6 literals anywhere but alone.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, cfg, opts...)
}

// urlForm is what etcd:// URLs share with those of other backends.
var urlForm = storeurl.Form{Schemes: []string{"etcd"}, Shape: "host:port", Invalid: turnstile.ErrInvalidURL}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (clientv3.Config, []Option, error) {
	var cfg clientv3.Config
	var opts []Option
	err := urlForm.Read(u, func(r *storeurl.URL) error {
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("unexpected path %q (set the key prefix with ?prefix=)", u.Path)
		}
		// Members are dialled as http://host:port; an empty host is
		// localhost.
		addrs, err := r.Hosts("2379", "localhost")
		if err != nil {
			return err
		}
		for _, a := range addrs {
			cfg.Endpoints = append(cfg.Endpoints, "http://"+a)
		}
		cfg.Username, cfg.Password = r.Username, r.Password
		cfg.DialTimeout = DefaultDialTimeout
		err = r.Params(map[string]func(string) error{
			"dial_timeout": func(v string) (err error) {
				cfg.DialTimeout, err = storeurl.PositiveDuration("dial_timeout", v)
				return err
			},
			"prefix": func(v string) error {
				opts = append(opts, WithPrefix(v))
				return nil
			},
		})
		if err != nil {
			return err
		}
		c := defaultConfig()
		return c.apply(opts)
	})
	if err != nil {
		return clientv3.Config{}, nil, err
	}
	return cfg, opts, nil
}
