package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
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
//
// A primary with replicas watched by Redis Sentinel is named through its
// Sentinels:
//
//	redis+sentinel://[user:password@]s1:26379,s2:26379,s3:26379/MASTERSET[/db][?...]
//
// and rediss+sentinel:// for TLS. The client asks the Sentinels (port
// 26379 by default) where the primary of MASTERSET is, connects to it,
// and follows a failover to whichever replica they promote. The user and
// password log in to the primary and, by default, to the Sentinels too
// (the same credentials, as when the Sentinels have the data nodes'
// password); sentinel_auth=none connects to Sentinels that have no
// password. Sentinels with credentials of their own are not supported
// in a URL: build the rueidis client yourself (rueidis.SentinelOption).
// TLS, when on, is the same for the Sentinels and the data nodes.
//
// wait_replicas=N (and wait_timeout=DURATION, default 100ms) makes every
// grant and renewal wait until N replicas have it (WithWaitReplicas),
// with one host or through Sentinels; a Redis Cluster does not take it.
var urlForm = storeurl.Form{Schemes: []string{"redis", "rediss", "redis+sentinel", "rediss+sentinel"}, Shape: "host:port", Invalid: turnstile.ErrInvalidURL}

// DefaultSentinelPort is the port of a Sentinel that a redis+sentinel://
// URL names without one.
const DefaultSentinelPort = "26379"

// sentinelRefresh is how often a client opened from a redis+sentinel://
// URL asks the Sentinels where the primary is, besides following their
// +switch-master notices: a notice missed (the Sentinel it listened to
// went away at that moment) is caught up within this time.
const sentinelRefresh = 5 * time.Second

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

// ParseURL reads a redis://, rediss://, redis+sentinel:// or
// rediss+sentinel:// URL as turnstile.Open does, TLS
// and password_file included, for a program that makes its rueidis
// client itself: it returns the client's options and the backend's
// (pass the client to New with them). Its errors wrap
// turnstile.ErrInvalidURL and show none of the URL's secrets.
func ParseURL(raw string) (rueidis.ClientOption, []Option, error) {
	if redact.Ambiguous(raw) {
		return rueidis.ClientOption{}, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, redact.ErrAmbiguous)
	}
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
		sentinel := strings.HasSuffix(r.Scheme, "+sentinel")
		port := "6379"
		if sentinel {
			port = DefaultSentinelPort
		}
		// An empty host means localhost, as for a single host.
		addrs, err := r.Hosts(port, "localhost")
		if err != nil {
			return err
		}
		opt.InitAddress = addrs
		opt.Username, opt.Password = r.Username, r.Password
		if sentinel {
			if opt.Sentinel.MasterSet, opt.SelectDB, err = sentinelPath(r.Path); err != nil {
				return err
			}
		} else {
			if opt.SelectDB, err = r.Database(); err != nil {
				return err
			}
			if opt.SelectDB != 0 && len(addrs) > 1 {
				return fmt.Errorf("database %d: Redis Cluster has database 0 only", opt.SelectDB)
			}
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
		waitReplicas, waitTimeout := -1, time.Duration(0)
		params := map[string]storeurl.Param{
			"dial_timeout":  storeurl.Store(&opt.Dialer.Timeout, storeurl.PositiveDuration),
			"flush_delay":   storeurl.Store(&opt.MaxFlushDelay, storeurl.DurationIn(0, MaxFlushDelay, "20us")),
			"protocol":      storeurl.Store(&protocol, storeurl.OneOf("2", "3")),
			"prefix":        storeurl.Append(&opts, storeurl.String, WithPrefix),
			"fence_grace":   storeurl.Append(&opts, storeurl.Duration, WithFenceGrace),
			"wait_replicas": storeurl.Store(&waitReplicas, storeurl.IntIn(0, maxWaitReplicas)),
			"wait_timeout":  storeurl.Store(&waitTimeout, storeurl.DurationIn(time.Millisecond, maxWaitTimeout, "100ms")),
		}
		sentinelAuth := "same"
		if sentinel {
			params["sentinel_auth"] = storeurl.Store(&sentinelAuth, storeurl.OneOf("same", "none"))
		}
		if err := r.Params(tl.Params(params)); err != nil {
			return err
		}
		switch {
		case waitTimeout != 0 && waitReplicas <= 0:
			return fmt.Errorf("wait_timeout=%v without wait_replicas=N (N at least 1): it is how long a grant waits for N replicas", waitTimeout)
		case waitReplicas > 0 && len(addrs) > 1 && !sentinel:
			return fmt.Errorf("wait_replicas=%d: several hosts are a Redis Cluster, which does not take wait_replicas (use one primary, or its Sentinels with redis+sentinel://)", waitReplicas)
		case waitReplicas > 0:
			opts = append(opts, WithWaitReplicas(waitReplicas, waitTimeout))
		}
		opt.AlwaysRESP2 = protocol == "2"
		if sentinel {
			if sentinelAuth == "same" {
				opt.Sentinel.Username, opt.Sentinel.Password = opt.Username, opt.Password
			}
			opt.Sentinel.Dialer = opt.Dialer
			opt.Sentinel.TopologyRefreshInterval = sentinelRefresh
		}
		if r.Scheme == "rediss" || r.Scheme == "rediss+sentinel" || tl.Given() {
			// Read the files now: a bad one is a bad URL, not an outage.
			if opt.TLSConfig, err = tl.Config(); err != nil {
				return err
			}
			if opt.TLSConfig.ServerName == "" && len(addrs) == 1 && !sentinel {
				opt.TLSConfig.ServerName, _, _ = net.SplitHostPort(addrs[0])
			} // else crypto/tls checks each node's certificate against the address dialled
			opt.DialCtxFn = dialTLS
			if sentinel {
				opt.Sentinel.TLSConfig = opt.TLSConfig.Clone()
			}
		}
		// Check the options here, so a bad prefix is reported as a bad URL.
		return CheckOptions(opts...)
	})
	return opt, opts, err
}

// sentinelPath reads the path of a redis+sentinel:// URL: /MASTERSET,
// then optionally /db.
func sentinelPath(path string) (master string, db int, err error) {
	rest := strings.TrimPrefix(path, "/")
	master, dbPart, hasDB := strings.Cut(rest, "/")
	if master == "" {
		return "", 0, errors.New("no master set: want redis+sentinel://host:port,.../MASTERSET[/db], the name the Sentinels monitor")
	}
	if strings.IndexFunc(master, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return "", 0, fmt.Errorf("master set %q has a space or control character", master)
	}
	if hasDB {
		if db, err = strconv.Atoi(dbPart); err != nil || db < 0 || strings.HasPrefix(dbPart, "+") {
			return "", 0, fmt.Errorf("database %q after the master set is not a non-negative number", dbPart)
		}
	}
	return master, db, nil
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
