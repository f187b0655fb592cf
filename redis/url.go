package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/tlshint"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	redis://[user:password@]host[:port][/db][?dial_timeout=5s&prefix=app:&fence_grace=10s&flush_delay=20us]
//	redis://[user:password@]host1:port1,host2:port2,...[?...]
//
// and rediss:// for TLS. The port defaults to 6379, the database to 0.
// The password may come from a file instead: password_file=PATH.
//
// TLS: rediss:// turns it on, verifying the server against the system's
// roots; so does any of the TLS parameters, with redis:// too:
//
//	ca_file=PATH      the authorities that sign the servers' certificates
//	cert_file=PATH    the client's certificate, for servers that verify
//	key_file=PATH     clients (--tls-auth-clients yes), and its key
//	server_name=NAME  the name the servers' certificates carry
//
// such as rediss://user:pass@h:6380?ca_file=/etc/ca.pem. The files are
// read with the URL: a bad one is a bad URL. The server's certificate is
// always verified. server_name defaults, for one host, to that host,
// which every node of a cluster found from it is then checked against
// too; for several hosts, to the host of each node dialled. Every node
// of a cluster is connected to with the same TLS configuration.
//
// Several hosts name nodes of one Redis Cluster: the client learns the
// whole cluster from whichever of them answers first, so the list need
// not be complete, and a cluster has database 0 only. A single host may
// be a cluster node too; the client notices and follows the cluster.
// Independent servers are no cluster: lock on them with package redlock.
// IPv6 nodes are bracketed ([::1]:6379), alone or in a list.
var urlForm = storeurl.Form{Schemes: []string{"redis", "rediss"}, Shape: "host:port", Invalid: turnstile.ErrInvalidURL}

func init() {
	for _, scheme := range urlForm.Schemes {
		turnstile.Register(scheme, storeurl.Opener(parseURL, dialURL))
	}
}

// DefaultDialTimeout bounds connecting when a URL sets no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// DefaultFlushDelay is how long a client opened from a URL lets commands
// gather after each write to a connection, while other calls are in
// flight (rueidis's MaxFlushDelay), unless the URL sets flush_delay: many
// goroutines' lock calls then leave in one system call instead of one
// each, which saves CPU on both sides. A lone caller is never delayed.
const DefaultFlushDelay = 20 * time.Microsecond

// MaxFlushDelay bounds flush_delay: longer delays cost latency and save
// no more system calls.
const MaxFlushDelay = time.Millisecond

// ParseURL reads a redis:// or rediss:// URL as turnstile.Open does, TLS
// and password_file included, for a program that makes its rueidis
// client itself: it returns the client's options and the backend's
// (pass the client to New with them). Its errors wrap
// turnstile.ErrInvalidURL and show none of the URL's secrets.
func ParseURL(raw string) (rueidis.ClientOption, []Option, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, password and all: keep the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return rueidis.ClientOption{}, nil, redact.Error(fmt.Errorf("%w: %s: %v", turnstile.ErrInvalidURL, redact.URL(raw), err), raw)
	}
	return parseURL(u)
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (opt rueidis.ClientOption, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) error {
		// An empty host means localhost, as for a single host.
		addrs, err := r.Hosts("6379", "localhost")
		if err != nil {
			return err
		}
		opt.InitAddress = addrs
		opt.Username, opt.Password = r.Username, r.Password
		if opt.SelectDB, err = r.Database(); err != nil {
			return err
		}
		if opt.SelectDB != 0 && len(addrs) > 1 {
			return fmt.Errorf("database %d: Redis Cluster has database 0 only", opt.SelectDB)
		}
		// Lock scripts never read through a client-side cache; without it
		// the connection skips CLIENT TRACKING.
		opt.DisableCache = true
		opt.Dialer.Timeout = DefaultDialTimeout
		opt.MaxFlushDelay = DefaultFlushDelay
		// RESP2 (protocol=2) keeps subscriptions on a connection of their
		// own, for servers that accept no other command on a subscribed
		// connection even under RESP3 (some embedded Redis
		// implementations); the default, 3, multiplexes them.
		protocol := "3"
		var tl storeurl.TLS
		if err := r.Params(tl.Params(map[string]storeurl.Param{
			"dial_timeout": storeurl.Store(&opt.Dialer.Timeout, storeurl.PositiveDuration),
			"flush_delay":  storeurl.Store(&opt.MaxFlushDelay, storeurl.DurationIn(0, MaxFlushDelay, "20us")),
			"protocol":     storeurl.Store(&protocol, storeurl.OneOf("2", "3")),
			"prefix":       storeurl.Append(&opts, storeurl.String, WithPrefix),
			"fence_grace":  storeurl.Append(&opts, storeurl.Duration, WithFenceGrace),
		})); err != nil {
			return err
		}
		opt.AlwaysRESP2 = protocol == "2"
		if r.Scheme == "rediss" || tl.Given() {
			// Read the files now: a bad one is a bad URL, not an outage.
			if opt.TLSConfig, err = tl.Config(); err != nil {
				return err
			}
			if opt.TLSConfig.ServerName == "" && len(addrs) == 1 {
				opt.TLSConfig.ServerName, _, _ = net.SplitHostPort(addrs[0])
			} // else crypto/tls checks each node's certificate against the address dialled
			opt.DialCtxFn = dialTLS
		}
		// Check the options here, so a bad prefix is reported as a bad URL.
		return CheckOptions(opts...)
	})
	return opt, opts, err
}

// dialURL is Dial for turnstile.Open. A plain-text connection that the
// server resets at once most likely reached a TLS port: its error says
// so.
func dialURL(ctx context.Context, opt rueidis.ClientOption, opts ...Option) (*Backend, error) {
	b, err := Dial(ctx, opt, opts...)
	if err != nil && opt.TLSConfig == nil {
		err = tlshint.Plain(err, plainHint)
	}
	return b, err
}

// plainHint is what the error of a plain-text connection that the server
// reset suggests.
const plainHint = "is the server expecting TLS? use rediss:// or the TLS parameters ca_file, cert_file, key_file"

// dialTLS connects every node of a URL with TLS: its errors say what a
// client certificate missing or a server speaking plain text look like.
func dialTLS(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	return tlshint.Dial(ctx, d, dst, cfg, "use redis:// without the TLS parameters ca_file, cert_file, key_file, server_name")
}
