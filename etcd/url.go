package etcd

import (
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// DefaultDialTimeout bounds connecting when a URL sets no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	etcd://[user:password@]host[:port][,host[:port]...][?prefix=/turnstile/&dial_timeout=5s]
//
// The port defaults to 2379. Several hosts are members of one cluster.
// The client speaks plain HTTP/2 (no TLS); for TLS build a clientv3.Config
// and call Dial. IPv6 members are bracketed ([::1]:2379), alone or in
// a list.
var urlForm = storeurl.Form{Schemes: []string{"etcd"}, Shape: "host:port", Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.Register("etcd", storeurl.Opener(parseURL, Dial))
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (cfg clientv3.Config, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) error {
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
		if err := r.Params(map[string]storeurl.Param{
			"prefix":       storeurl.Append(&opts, storeurl.String, WithPrefix),
			"dial_timeout": storeurl.Store(&cfg.DialTimeout, storeurl.PositiveDuration),
		}); err != nil {
			return err
		}
		c := defaultConfig()
		return c.apply(opts)
	})
	return cfg, opts, err
}
