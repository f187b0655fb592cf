package postgres

import (
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	postgres://[user[:password]@]host[:port][/db][?lock_conns=4&op_timeout=5s&<libpq parameters>]
//
// and postgresql://. Parameters other than lock_conns and op_timeout go
// to pgx as libpq connection parameters (sslmode, connect_timeout,
// application_name, ...).
var urlForm = storeurl.Form{Schemes: []string{"postgres", "postgresql"}, Shape: "host:port/db", Invalid: turnstile.ErrInvalidURL}

func init() {
	open := storeurl.Opener(parseURL, Dial)
	turnstile.Register("postgres", open)
	turnstile.Register("postgresql", open)
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (connCfg *pgx.ConnConfig, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) error {
		// pgx reads the hosts (and falls back to its defaults for none);
		// they are checked here so that a malformed one is a bad URL.
		if u.Host != "" {
			if _, err := r.Hosts("5432", "localhost"); err != nil {
				return err
			}
		}
		q, err := r.OwnParams(map[string]storeurl.Param{
			"lock_conns": storeurl.Append(&opts, storeurl.IntIn(1, 1024), WithConns),
			"op_timeout": storeurl.Append(&opts, storeurl.PositiveDuration, WithOpTimeout),
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
	return connCfg, opts, err
}
