package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

func init() {
	turnstile.Register("postgres", open)
	turnstile.Register("postgresql", open)
}

// open serves turnstile.Open for
//
//	postgres://[user[:password]@]host[:port][/db][?lock_conns=4&op_timeout=5s&<libpq parameters>]
//
// and postgresql://. Parameters other than lock_conns and op_timeout go
// to pgx as libpq connection parameters (sslmode, connect_timeout,
// application_name, ...).
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	connCfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, connCfg, opts...)
}

// urlForm is what postgres:// URLs share with those of other backends.
var urlForm = storeurl.Form{Schemes: []string{"postgres", "postgresql"}, Shape: "host:port/db", Invalid: turnstile.ErrInvalidURL}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (*pgx.ConnConfig, []Option, error) {
	var connCfg *pgx.ConnConfig
	var opts []Option
	err := urlForm.Read(u, func(r *storeurl.URL) error {
		// pgx reads the hosts (and falls back to its defaults for none);
		// they are checked here so that a malformed one is a bad URL.
		if u.Host != "" {
			if _, err := r.Hosts("5432", "localhost"); err != nil {
				return err
			}
		}
		q, err := r.OwnParams(map[string]func(string) error{
			"lock_conns": func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 1024 {
					return fmt.Errorf("lock_conns=%q is not a number in [1, 1024]", v)
				}
				opts = append(opts, WithConns(n))
				return nil
			},
			"op_timeout": func(v string) error {
				d, err := storeurl.PositiveDuration("op_timeout", v)
				opts = append(opts, WithOpTimeout(d))
				return err
			},
		})
		if err != nil {
			return err
		}
		rest := *u
		rest.Scheme = "postgres"
		rest.RawQuery = q.Encode()
		connCfg, err = pgx.ParseConfig(rest.String())
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return connCfg, opts, nil
}
