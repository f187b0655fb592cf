package zookeeper

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// MinSessionTimeout is the shortest session timeout Open derives from a
// TTL: a shorter session is lost to an ordinary pause of a busy client
// (a garbage collection, a descheduled process), which would free every
// lock of a healthy holder.
const MinSessionTimeout = 2 * time.Second

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	zookeeper://[user:password@]host[:port][,host[:port]...][/chroot][?session_timeout=30s&dial_timeout=5s]
//	zookeeper://host:secureport[,...][/chroot]?ca_file=ca.pem[&cert_file=client.pem&key_file=client-key.pem][&server_name=zk.example.com]
//
// The port defaults to 2181. A user and password (in the URL or in
// password_file) authenticate the session with ZooKeeper's digest scheme
// and restrict every node the client creates to those credentials
// (WithDigestAuth). Any of ca_file, cert_file, key_file and server_name
// (storeurl.TLS), or tls=on (the system's roots), makes the client speak
// TLS to the servers' secureClientPort, verifying their certificates
// (WithTLS); tls=off with a TLS parameter is refused. The files are
// read when the URL is. Lock nodes live under /chroot/turnstile/locks
// (without a chroot, /turnstile/locks). IPv6 servers are bracketed
// ([::1]:2181), alone or in a list.
//
// The session bounds how long the lock of a crashed holder lasts: the
// server deletes its node when the session times out, and nothing else
// does. So that the lease TTL means what it means on every store, Open
// makes the session timeout the Client's TTL (turnstile.WithTTL, default
// 30 s), but no less than MinSessionTimeout. A session_timeout in the URL
// is used as given, and a TTL longer than it is refused: the server
// would free the lock of a holder it cannot hear from (a partition)
// while that holder still trusts its lease. The server raises a session
// timeout below its minSessionTimeout (2 × tickTime: 4 s with the
// default tickTime of 2 s) to that minimum, and the lock of a crashed
// holder then lasts that long; the server also expires sessions one tick
// late at most. The server also cuts a session timeout above its
// maxSessionTimeout (20 ticks: 40 s with the default tickTime) to it:
// Open then refuses a TTL longer than the session granted, naming both
// (see Backend.GrantedSessionTimeout).
//
// dial_timeout (default DefaultDialTimeout, 5 s) bounds how long Open
// waits for a session, whatever its context: with no server answering
// it fails with an error that names the servers (WithDialTimeout).
var urlForm = storeurl.Form{Schemes: []string{"zookeeper"}, Shape: "[user:password@]host:port/chroot", Users: storeurl.UserOptional, Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.Register("zookeeper", open)
}

// open is what turnstile.Open calls for a zookeeper:// URL.
func open(ctx context.Context, u *url.URL, oc driver.OpenConfig) (driver.Backend, error) {
	servers, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	opts, err = sessionFor(u, opts, oc.TTL)
	if err != nil {
		return nil, err
	}
	b, err := Dial(ctx, servers, opts...)
	if err != nil {
		return nil, err
	}
	// The servers may grant a shorter session than was asked: refused
	// now rather than at the first acquisition.
	if err := b.fitTTL(oc.TTL); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// sessionFor returns opts with the session timeout a Client with the
// lease TTL ttl needs: the TTL, at least MinSessionTimeout, when u sets
// none; when u sets one, opts as they are, or an error if ttl is longer.
func sessionFor(u *url.URL, opts []Option, ttl time.Duration) ([]Option, error) {
	if !u.Query().Has("session_timeout") {
		return append(opts, WithSessionTimeout(max(ttl, MinSessionTimeout))), nil
	}
	cfg := config{timeout: DefaultSessionTimeout}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if ttl > cfg.timeout {
		return nil, fmt.Errorf("%w: the lease TTL %v is longer than session_timeout=%v in the URL: ZooKeeper frees the lock of a holder it has not heard from for the session timeout, while that holder would still trust its lease; use a TTL of at most %v, or raise session_timeout (or leave it out: it is then the TTL)",
			turnstile.ErrInvalidTTL, ttl, cfg.timeout, cfg.timeout)
	}
	return opts, nil
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (servers []string, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) (err error) {
		if servers, err = r.Hosts("2181", ""); err != nil {
			return err
		}
		chroot, err := cleanRoot(u.Path)
		if err != nil {
			return fmt.Errorf("chroot: %v", err)
		}
		opts = []Option{WithRoot(chroot + DefaultRoot)}
		if r.Username != "" || r.Password != "" {
			o := WithDigestAuth(r.Username, r.Password)
			if err := o(&config{}); err != nil {
				return fmt.Errorf("%v: want zookeeper://user:password@host (or the password in %s)", err, storeurl.PasswordFileParam)
			}
			opts = append(opts, o)
		}
		var tl storeurl.TLS
		if err := r.Params(tl.SwitchParams(map[string]storeurl.Param{
			"session_timeout": storeurl.Append(&opts, storeurl.DurationIn(time.Millisecond, 0, "30s"), WithSessionTimeout),
			"dial_timeout":    storeurl.Append(&opts, storeurl.PositiveDuration, WithDialTimeout),
		})); err != nil {
			return err
		}
		if useTLS, err := tl.Enabled(); err != nil || !useTLS {
			return err
		}
		cfg, err := tl.Config()
		if err != nil {
			return err
		}
		opts = append(opts, WithTLS(cfg))
		return nil
	})
	return servers, opts, err
}
