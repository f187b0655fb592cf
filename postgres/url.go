package postgres

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	postgres://[user[:password]@]host[:port][/db][?lock_conns=4&op_timeout=5s&<TLS parameters>&<libpq parameters>]
//
// and postgresql://. A URL without a host is refused unless libpq's host
// parameter names one (for a Unix socket, its directory). The TLS
// parameters are those every scheme shares (ca_file, cert_file,
// key_file, server_name; see storeurl.TLS): any of them turns on TLS with
// the server's certificate and name verified (sslmode=verify-full, the
// default then, and the only sslmode they go with). password_file names a
// file holding the password. Parameters other than these go to pgx as
// libpq connection parameters (sslmode, sslrootcert, connect_timeout,
// application_name, ...).
var urlForm = storeurl.Form{Schemes: []string{"postgres", "postgresql"}, Shape: "host:port/db", Invalid: turnstile.ErrInvalidURL}

// libpqTLSParams are libpq's parameters that say what the TLS parameters
// say: a URL gives one set or the other.
var libpqTLSParams = []string{"ssl", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni"}

func init() {
	open := storeurl.Opener(parseURL, Dial)
	turnstile.Register("postgres", open)
	turnstile.Register("postgresql", open)
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (connCfg *pgx.ConnConfig, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) error {
		var tl storeurl.TLS
		q, err := r.OwnParams(tl.Params(map[string]storeurl.Param{
			"lock_conns": storeurl.Append(&opts, storeurl.IntIn(1, 1024), WithConns),
			"op_timeout": storeurl.Append(&opts, storeurl.PositiveDuration, WithOpTimeout),
		}))
		if err != nil {
			return err
		}
		// pgx reads the hosts; they are checked here so that a malformed
		// one is a bad URL. With none pgx would try Unix sockets in
		// directories of its choice, or fail on the bare "postgres:" it
		// is left with: a URL names its server, or libpq's host
		// parameter does.
		switch {
		case u.Host != "":
			if _, err := r.Hosts("5432", ""); err != nil {
				return err
			}
		case q.Get("host") == "":
			return errors.New("the URL names no host: give postgres://HOST[:PORT]/DB (for a Unix socket, ?host=/run/postgresql, its directory)")
		}
		// pgx sends a parameter it does not know to the server as a
		// run-time setting: a misspelt password (pasword=…) would travel
		// there, and come back in the server's refusal.
		for _, name := range slices.Sorted(maps.Keys(q)) {
			if name != "password" && redact.Misspelt(name) {
				return storeurl.Unknown(url.Values{name: q[name]}, map[string]bool(nil), name, "a misspelt secret? libpq's password parameters are password and sslpassword")
			}
		}
		if tl.Given() {
			if len(q["sslmode"]) > 1 {
				return fmt.Errorf("query parameter %q given %d times", "sslmode", len(q["sslmode"]))
			}
			switch mode := q.Get("sslmode"); mode {
			case "", "verify-full":
				q.Set("sslmode", "verify-full")
			case "disable", "allow", "prefer":
				// allow and prefer fall back to plain text: never with
				// the TLS parameters.
				return fmt.Errorf("sslmode=%s contradicts the TLS parameters: %w", mode, tl.RefuseWithout("sslmode=verify-full or leave sslmode out"))
			default:
				return fmt.Errorf("sslmode=%q with the TLS parameters (ca_file, cert_file, key_file, server_name), which always verify the server's certificate and name: use sslmode=verify-full or leave sslmode out", mode)
			}
			for _, p := range libpqTLSParams {
				if q.Has(p) {
					return fmt.Errorf("%s with ca_file, cert_file, key_file or server_name: give libpq's TLS parameters or turnstile's, not both", p)
				}
			}
		}
		rest := *r.URL
		rest.Scheme = "postgres"
		rest.RawQuery = q.Encode()
		if rest.Host == "" && rest.Path == "" {
			rest.Path = "/" // else it prints as "postgres:?…", which pgx misreads
		}
		connCfg, err = pgx.ParseConfig(rest.String())
		if err != nil {
			return err
		}
		if r.Password != "" {
			connCfg.Password = r.Password // also from password_file
		}
		if tl.Given() {
			return useTLS(connCfg, &tl)
		}
		return nil
	})
	return connCfg, opts, err
}

// useTLS makes every host of connCfg (pgx tries them in turn) connect
// with tl's TLS configuration, verified under server_name or the host's
// own name. Hosts that are Unix sockets take no TLS, as in libpq.
func useTLS(connCfg *pgx.ConnConfig, tl *storeurl.TLS) error {
	base, err := tl.Config()
	if err != nil {
		return err
	}
	forHost := func(host string) *tls.Config {
		c := base.Clone()
		if c.ServerName == "" {
			c.ServerName = host
		}
		return c
	}
	if connCfg.TLSConfig != nil {
		connCfg.TLSConfig = forHost(connCfg.Host)
	}
	for _, f := range connCfg.Fallbacks {
		if f.TLSConfig != nil {
			f.TLSConfig = forHost(f.Host)
		}
	}
	return nil
}
