package mysql

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

func init() {
	turnstile.Register("mysql", open)
}

// open serves turnstile.Open for
//
//	mysql://user[:password]@host[:port]/db[?conns=4&dial_timeout=5s&tls=true]
//
// The port defaults to 3306. tls is true (verify the server), skip-verify,
// preferred or false (the default), as in the driver's DSN.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, cfg, opts...)
}

// urlForm is what mysql:// URLs share with those of other backends.
var urlForm = storeurl.Form{
	Schemes: []string{"mysql"},
	Shape:   "user:password@host:port/db",
	Users:   storeurl.UserRequired,
	Invalid: turnstile.ErrInvalidURL,
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (*gomysql.Config, []Option, error) {
	cfg := gomysql.NewConfig()
	var opts []Option
	err := urlForm.Read(u, func(r *storeurl.URL) error {
		addrs, err := r.Hosts("3306", "localhost")
		if err != nil {
			return err
		}
		if len(addrs) != 1 {
			return fmt.Errorf("%d hosts in %q: mysql:// takes one", len(addrs), u.Host)
		}
		cfg.Net, cfg.Addr = "tcp", addrs[0]
		cfg.User, cfg.Passwd = r.Username, r.Password
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
		if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
			return fmt.Errorf("path %q does not name one database", u.Path)
		}
		cfg.Timeout = DefaultDialTimeout
		err = r.Params(map[string]func(string) error{
			"conns": func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("conns=%q is not a number", v)
				}
				opts = append(opts, WithConns(n))
				return nil
			},
			"dial_timeout": func(v string) (err error) {
				cfg.Timeout, err = storeurl.PositiveDuration("dial_timeout", v)
				return err
			},
			"tls": func(v string) error {
				switch v {
				case "true", "false", "skip-verify", "preferred":
					cfg.TLSConfig = v
					return nil
				}
				return fmt.Errorf("tls=%q is not true, false, skip-verify or preferred", v)
			},
		})
		if err != nil {
			return err
		}
		c := defaultConfig()
		if err := c.apply(opts); err != nil {
			return err
		}
		if cfg.TLSConfig != "" {
			// NewConnector resolves the TLS name; do it here so a bad value
			// is a bad URL, not a dial error.
			if _, err := gomysql.ParseDSN(cfg.FormatDSN()); err != nil {
				return fmt.Errorf("%v", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return cfg, opts, nil
}
