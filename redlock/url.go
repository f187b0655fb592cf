package redlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/tlshint"
	"github.com/turnstilelock/turnstile/redis"
)

// DefaultDialTimeout bounds connecting to each node when a URL sets no
// dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// urlForm is what redlock:// URLs share with those of other backends.
var urlForm = storeurl.Form{Schemes: []string{"redlock"}, Shape: "host1:port1,host2:port2,...", Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.Register("redlock", open)
}

// open serves turnstile.Open for
//
//	redlock://[user:password@]host1[:port1],host2[:port2],...[/db][?node_timeout=50ms&quarantine=35s&fencing=on&prefix=app:&fence_grace=10s&dial_timeout=5s&flush_delay=20us]
//
// Ports default to 6379, the database to 0; user, password and database
// apply to every node. The password may come from a file instead:
// password_file=PATH. Hosts are names, IPv4 addresses or bracketed IPv6
// addresses ([::1]:6379).
// flush_delay is each node client's write batching, as for redis://
// (default redis.DefaultFlushDelay, 0 off).
//
// TLS, to every node alike: tls=on turns it on, verifying the servers
// against the system's roots; so does any of the TLS parameters, as for
// rediss://:
//
//	ca_file=PATH      the authorities that sign the servers' certificates
//	cert_file=PATH    the client's certificate, for servers that verify
//	key_file=PATH     clients (--tls-auth-clients yes), and its key
//	server_name=NAME  the name every server's certificate carries
//	                  (default: the host of each node)
//
// such as redlock://user:pass@h1:6380,h2:6380,h3:6380?ca_file=/etc/ca.pem.
// tls=off with a TLS parameter is refused. The files are read with the
// URL: a bad one is a bad URL. The servers' certificates are always
// verified.
func open(ctx context.Context, u *url.URL, _ driver.OpenConfig) (driver.Backend, error) {
	addrs, opt, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	b, err := Dial(ctx, addrs, opt, opts...)
	if opt.TLSConfig == nil && tlshint.Closed(err) {
		// After the nodes' errors, one to a line.
		err = fmt.Errorf("%w\n(%s)", err, plainHint)
	}
	return b, err
}

// plainHint is what the error of plain-text connections that the
// servers reset suggests.
const plainHint = "are the servers expecting TLS? use tls=on or the TLS parameters ca_file, cert_file, key_file"

// dialTLS connects each node with TLS: its errors say what a client
// certificate missing or a server speaking plain text look like.
func dialTLS(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	return tlshint.Dial(ctx, d, dst, cfg, "drop tls=on and the TLS parameters ca_file, cert_file, key_file, server_name")
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (addrs []string, opt rueidis.ClientOption, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) (err error) {
		if u.Host == "" {
			return fmt.Errorf("no nodes: want redlock://%s", urlForm.Shape)
		}
		if addrs, err = r.Hosts("6379", ""); err != nil {
			return err
		}
		opt.Username, opt.Password = r.Username, r.Password
		if opt.SelectDB, err = r.Database(); err != nil {
			return err
		}
		opt.Dialer.Timeout = DefaultDialTimeout
		opt.MaxFlushDelay = redis.DefaultFlushDelay
		var nodeOpts []redis.Option
		fencing := true
		var tl storeurl.TLS
		if err := r.Params(tl.SwitchParams(map[string]storeurl.Param{
			"node_timeout": storeurl.Append(&opts, storeurl.Duration, WithNodeTimeout),
			"quarantine":   storeurl.Append(&opts, storeurl.Duration, WithRestartQuarantine),
			"fencing":      storeurl.Store(&fencing, onOff),
			"prefix":       storeurl.Append(&nodeOpts, storeurl.String, redis.WithPrefix),
			"fence_grace":  storeurl.Append(&nodeOpts, storeurl.Duration, redis.WithFenceGrace),
			"dial_timeout": storeurl.Store(&opt.Dialer.Timeout, storeurl.PositiveDuration),
			"flush_delay":  storeurl.Store(&opt.MaxFlushDelay, storeurl.DurationIn(0, redis.MaxFlushDelay, "20us")),
		})); err != nil {
			return err
		}
		useTLS, err := tl.Enabled()
		if err != nil {
			return err
		}
		if useTLS {
			// Read the files now: a bad one is a bad URL, not an outage.
			// An empty ServerName is each node's own host.
			if opt.TLSConfig, err = tl.Config(); err != nil {
				return err
			}
			opt.DialCtxFn = dialTLS
		}
		if !fencing {
			opts = append(opts, WithoutFencing())
		}
		if len(nodeOpts) > 0 {
			opts = append(opts, WithNodeOptions(nodeOpts...))
		}
		// Check every option here, so that a bad value is reported as a
		// bad URL before anything is dialled.
		cfg := defaultConfig()
		if err := cfg.apply(opts); err != nil {
			return err
		}
		return redis.CheckOptions(nodeOpts...)
	})
	return addrs, opt, opts, err
}

// onOff reads fencing=on or off (also true, false, 1, 0, in any case).
func onOff(v string) (bool, error) { return storeurl.OnOff(v) }
