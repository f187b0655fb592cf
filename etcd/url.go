package etcd

import (
	"errors"
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
//	etcd://[user:password@]host[:port][,host[:port]...][?prefix=/turnstile/&dial_timeout=5s&batch=64]
//	etcd://[user:password@]host[:port][,...]?ca_file=ca.pem[&cert_file=client.pem&key_file=client-key.pem][&server_name=etcd.example.com]
//	etcd://host[:port][,...]?tls=on
//
// The port defaults to 2379. Several hosts are members of one cluster.
// IPv6 members are bracketed ([::1]:2379), alone or in a list.
//
// Without TLS parameters the client speaks plain HTTP/2. Any of
// ca_file, cert_file, key_file and server_name (storeurl.TLS), or tls=on
// (the system's roots), makes it speak TLS to every member, verifying
// the member's certificate; tls=off with a TLS parameter is refused.
// The files are read when the URL is.
//
// batch is how many writes of concurrent callers one transaction
// carries at most (WithBatch); batch=1 sends each alone.
//
// A user (password in the URL or in password_file) logs in to etcd's
// authentication; the user needs a role that may read and write the
// keys under the prefix.
var urlForm = storeurl.Form{Schemes: []string{"etcd"}, Shape: "[user:password@]host:port", Invalid: turnstile.ErrInvalidURL}

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
		// An empty host is localhost.
		addrs, err := r.Hosts("2379", "localhost")
		if err != nil {
			return err
		}
		if r.Password != "" && r.Username == "" {
			return errors.New("a password without a user name: want etcd://user:password@host")
		}
		if r.Username != "" && r.Password == "" {
			return fmt.Errorf("user %q without a password: give it in the URL or in %s", r.Username, storeurl.PasswordFileParam)
		}
		cfg.Username, cfg.Password = r.Username, r.Password
		cfg.DialTimeout = DefaultDialTimeout
		var tl storeurl.TLS
		if err := r.Params(tl.SwitchParams(map[string]storeurl.Param{
			"prefix":       storeurl.Append(&opts, storeurl.String, WithPrefix),
			"dial_timeout": storeurl.Store(&cfg.DialTimeout, storeurl.PositiveDuration),
			"batch":        storeurl.Append(&opts, storeurl.IntIn(1, maxBatch), WithBatch),
		})); err != nil {
			return err
		}
		useTLS, err := tl.Enabled()
		if err != nil {
			return err
		}
		// Members are dialled as http://host:port, or https://host:port
		// with TLS.
		scheme := "http://"
		if useTLS {
			if cfg.TLS, err = tl.Config(); err != nil {
				return err
			}
			scheme = "https://"
		}
		for _, a := range addrs {
			cfg.Endpoints = append(cfg.Endpoints, scheme+a)
		}
		c := defaultConfig()
		return c.apply(opts)
	})
	return cfg, opts, err
}
