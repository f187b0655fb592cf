package mysql

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	mysql://user[:password]@host[:port]/db[?conns=4&dial_timeout=5s&tls=true&ca_file=…&cert_file=…&key_file=…&server_name=…&password_file=…]
//
// The port defaults to 3306. tls is true (verify the server against the
// system's roots), skip-verify, preferred or false (the default), as in
// the driver's DSN. The TLS parameters every scheme shares (ca_file,
// cert_file, key_file, server_name; see storeurl.TLS) turn TLS on with
// the server verified, against ca_file's authorities if given: with them
// tls may only be true. password_file names a file holding the password.
var urlForm = storeurl.Form{
	Schemes: []string{"mysql"},
	Shape:   "user:password@host:port/db",
	Users:   storeurl.UserRequired,
	Invalid: turnstile.ErrInvalidURL,
}

func init() {
	turnstile.Register("mysql", storeurl.Opener(parseURL, Dial))
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (cfg *gomysql.Config, opts []Option, err error) {
	cfg = gomysql.NewConfig()
	err = urlForm.Read(u, func(r *storeurl.URL) error {
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
		var tl storeurl.TLS
		if err := r.Params(tl.Params(map[string]storeurl.Param{
			"conns":        storeurl.Append(&opts, storeurl.Int, WithConns),
			"dial_timeout": storeurl.Store(&cfg.Timeout, storeurl.PositiveDuration),
			"tls":          storeurl.Store(&cfg.TLSConfig, storeurl.OneOf("true", "false", "skip-verify", "preferred")),
		})); err != nil {
			return err
		}
		if tl.Given() {
			switch cfg.TLSConfig {
			case "", "true":
			case "false":
				return fmt.Errorf("tls=false contradicts the TLS parameters: %w", tl.RefuseWithout("tls=true or leave tls out"))
			default:
				// skip-verify does not verify the server; preferred falls
				// back to plain text.
				return fmt.Errorf("tls=%s with the TLS parameters (ca_file, cert_file, key_file, server_name), which always verify the server over TLS: use tls=true or leave tls out", cfg.TLSConfig)
			}
			tc, err := tl.Config()
			if err != nil {
				return err
			}
			if tc.ServerName == "" {
				tc.ServerName, _, _ = net.SplitHostPort(cfg.Addr)
			}
			cfg.TLS, cfg.TLSConfig = tc, ""
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
	return cfg, opts, err
}
