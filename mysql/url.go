package mysql

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
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

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (*gomysql.Config, []Option, error) {
	a, b, err := readURL(u)
	if err != nil {
		return nil, nil, redact.Error(err, u.String())
	}
	return a, b, nil
}

func readURL(u *url.URL) (*gomysql.Config, []Option, error) {
	bad := func(format string, a ...any) (*gomysql.Config, []Option, error) {
		return nil, nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	if !strings.EqualFold(u.Scheme, "mysql") {
		return bad("scheme %q is not mysql", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want mysql://user@host:port/db, got %s", redact.URL(u.String()))
	}
	if u.Fragment != "" {
		return bad("unexpected fragment #%s", u.Fragment)
	}
	cfg := gomysql.NewConfig()
	cfg.Net = "tcp"
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "3306"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return bad("port %q is not a number in [1, 65535]", port)
	}
	if strings.ContainsAny(host, "[]") {
		return bad("host %q: want host:port, or [address]:port for IPv6", u.Host)
	}
	cfg.Addr = net.JoinHostPort(host, port)
	if u.User == nil || u.User.Username() == "" {
		return bad("no user: want mysql://user:password@host:port/db")
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return bad("path %q does not name one database", u.Path)
	}
	cfg.Timeout = DefaultDialTimeout

	var opts []Option
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return bad("query parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "conns":
			n, err := strconv.Atoi(v)
			if err != nil {
				return bad("conns=%q is not a number", v)
			}
			opts = append(opts, WithConns(n))
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("dial_timeout=%q is not a positive duration such as 5s", v)
			}
			cfg.Timeout = d
		case "tls":
			switch v {
			case "true", "false", "skip-verify", "preferred":
				cfg.TLSConfig = v
			default:
				return bad("tls=%q is not true, false, skip-verify or preferred", v)
			}
		default:
			return bad("unknown query parameter %q (known: conns, dial_timeout, tls)", name)
		}
	}
	c := defaultConfig()
	if err := c.apply(opts); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, err)
	}
	if cfg.TLSConfig != "" {
		// NewConnector resolves the TLS name; do it here so a bad value is a
		// bad URL, not a dial error.
		if _, err := gomysql.ParseDSN(cfg.FormatDSN()); err != nil {
			return bad("%v", err)
		}
	}
	return cfg, opts, nil
}
