package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
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

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (*pgx.ConnConfig, []Option, error) {
	a, b, err := readURL(u)
	if err != nil {
		return nil, nil, redact.Error(err, u.String())
	}
	return a, b, nil
}

func readURL(u *url.URL) (*pgx.ConnConfig, []Option, error) {
	bad := func(format string, a ...any) (*pgx.ConnConfig, []Option, error) {
		return nil, nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "postgres" && scheme != "postgresql" {
		return bad("scheme %q is not postgres or postgresql", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want %s://host:port/db, got %s", scheme, redact.URL(u.String()))
	}
	if u.Fragment != "" {
		return bad("unexpected fragment #%s", u.Fragment)
	}
	q := u.Query()
	var opts []Option
	for name, vals := range q {
		if name != "lock_conns" && name != "op_timeout" {
			continue
		}
		if len(vals) != 1 {
			return bad("query parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "lock_conns":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1024 {
				return bad("lock_conns=%q is not a number in [1, 1024]", v)
			}
			opts = append(opts, WithConns(n))
		case "op_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("op_timeout=%q is not a positive duration such as 5s", v)
			}
			opts = append(opts, WithOpTimeout(d))
		}
		q.Del(name)
	}
	rest := *u
	rest.Scheme = "postgres"
	rest.RawQuery = q.Encode()
	connCfg, err := pgx.ParseConfig(rest.String())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, err)
	}
	return connCfg, opts, nil
}
