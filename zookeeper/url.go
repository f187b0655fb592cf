package zookeeper

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

func init() {
	turnstile.Register("zookeeper", open)
}

// open serves turnstile.Open for
//
//	zookeeper://host[:port][,host[:port]...][/chroot][?session_timeout=30s]
//
// The port defaults to 2181. Lock nodes live under /chroot/turnstile/locks
// (without a chroot, /turnstile/locks). In a list, name IPv6 servers by
// host name: net/url refuses bracketed IPv6 literals anywhere but alone.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	servers, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, servers, opts...)
}

// urlForm is what zookeeper:// URLs share with those of other backends.
var urlForm = storeurl.Form{
	Schemes: []string{"zookeeper"},
	Shape:   "host:port",
	Users:   storeurl.UserRefused,
	Invalid: turnstile.ErrInvalidURL,
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) ([]string, []Option, error) {
	var servers []string
	var opts []Option
	err := urlForm.Read(u, func(r *storeurl.URL) (err error) {
		if servers, err = r.Hosts("2181", ""); err != nil {
			return err
		}
		chroot, err := cleanRoot(u.Path)
		if err != nil {
			return fmt.Errorf("chroot: %v", err)
		}
		opts = []Option{WithRoot(chroot + DefaultRoot)}
		return r.Params(map[string]func(string) error{
			"session_timeout": func(v string) error {
				d, err := time.ParseDuration(v)
				if err != nil || d < time.Millisecond {
					return fmt.Errorf("session_timeout=%q is not a duration of 1ms or more such as 30s", v)
				}
				opts = append(opts, WithSessionTimeout(d))
				return nil
			},
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return servers, opts, nil
}
