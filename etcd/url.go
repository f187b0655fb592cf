package etcd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
)

// DefaultDialTimeout bounds connecting when a URL sets no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

func init() {
	turnstile.Register("etcd", open)
}

// open serves turnstile.Open for
//
//	etcd://[user:password@]host[:port][,host[:port]...][?prefix=/turnstile/&dial_timeout=5s]
//
// The port defaults to 2379. Several hosts are members of one cluster.
// The client speaks plain HTTP/2 (no TLS); for TLS build a clientv3.Config
// and call Dial. In a list, name IPv6 members by host name: net/url
// refuses bracketed IPv6 literals anywhere but alone.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, cfg, opts...)
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) (clientv3.Config, []Option, error) {
	a, b, err := readURL(u)
	if err != nil {
		return clientv3.Config{}, nil, redact.Error(err, u.String())
	}
	return a, b, nil
}

func readURL(u *url.URL) (clientv3.Config, []Option, error) {
	var cfg clientv3.Config
	bad := func(format string, a ...any) (clientv3.Config, []Option, error) {
		return cfg, nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	if !strings.EqualFold(u.Scheme, "etcd") {
		return bad("scheme %q is not etcd", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want etcd://host:port, got %s", redact.URL(u.String()))
	}
	if u.Fragment != "" {
		return bad("unexpected fragment #%s", u.Fragment)
	}
	if u.Path != "" && u.Path != "/" {
		return bad("unexpected path %q (set the key prefix with ?prefix=)", u.Path)
	}
	eps, err := parseHosts(u.Host)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Endpoints = eps
	cfg.DialTimeout = DefaultDialTimeout
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}

	var opts []Option
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return bad("query parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("dial_timeout=%q is not a positive duration such as 5s", v)
			}
			cfg.DialTimeout = d
		case "prefix":
			opts = append(opts, WithPrefix(v))
		default:
			return bad("unknown query parameter %q (known: dial_timeout, prefix)", name)
		}
	}
	c := defaultConfig()
	if err := c.apply(opts); err != nil {
		return cfg, nil, fmt.Errorf("%w: %w", turnstile.ErrInvalidURL, err)
	}
	return cfg, opts, nil
}

// parseHosts turns host[:port][,host[:port]...] into client endpoints
// http://host:port. An empty host means localhost.
func parseHosts(hosts string) ([]string, error) {
	bad := func(format string, a ...any) ([]string, error) {
		return nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	entries := strings.Split(hosts, ",")
	eps := make([]string, 0, len(entries))
	for i, e := range entries {
		if e == "" && len(entries) > 1 {
			return bad("host %d of %q is empty", i+1, hosts)
		}
		h := &url.URL{Host: e}
		host, port := h.Hostname(), h.Port()
		if host == "" {
			host = "localhost"
		}
		if port == "" {
			if strings.HasSuffix(e, ":") {
				return bad("host %q has an empty port", e)
			}
			port = "2379"
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return bad("port %q is not a number in [1, 65535]", port)
		}
		if _, err := netip.ParseAddr(host); strings.Contains(host, ":") && err != nil || strings.ContainsAny(host, "[]") {
			return bad("host %q: want host:port, or [address]:port for IPv6", e)
		}
		eps = append(eps, "http://"+net.JoinHostPort(host, port))
	}
	return eps, nil
}
