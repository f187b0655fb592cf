package zookeeper

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
)

func init() {
	turnstile.Register("zookeeper", open)
}

// open serves turnstile.Open for
//
//	zookeeper://host[:port][,host[:port]...][/chroot][?session_timeout=30s]
//
// The port defaults to 2181. Lock nodes live under /chroot/turnstile/locks
// (without a chroot, /turnstile/locks). In a list, name IPv6 servers by
// host name: net/url refuses bracketed IPv6 literals anywhere but alone.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	servers, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, servers, opts...)
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets.
func parseURL(u *url.URL) ([]string, []Option, error) {
	a, b, err := readURL(u)
	if err != nil {
		return nil, nil, redact.Error(err, u.String())
	}
	return a, b, nil
}

func readURL(u *url.URL) ([]string, []Option, error) {
	bad := func(format string, a ...any) ([]string, []Option, error) {
		return nil, nil, fmt.Errorf("%w: %s", turnstile.ErrInvalidURL, fmt.Sprintf(format, a...))
	}
	if !strings.EqualFold(u.Scheme, "zookeeper") {
		return bad("scheme %q is not zookeeper", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want zookeeper://host:port, got %s", redact.URL(u.String()))
	}
	if u.User != nil {
		return bad("user information is not supported")
	}
	if u.Fragment != "" {
		return bad("unexpected fragment #%s", u.Fragment)
	}
	var servers []string
	for i, e := range strings.Split(u.Host, ",") {
		if e == "" {
			return bad("server %d of %q is empty", i+1, u.Host)
		}
		h := &url.URL{Host: e}
		host, port := h.Hostname(), h.Port()
		if host == "" {
			return bad("server %q has no host", e)
		}
		if port == "" {
			port = "2181"
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return bad("port %q is not a number in [1, 65535]", port)
		}
		if strings.Contains(host, ":") && net.ParseIP(host) == nil || strings.ContainsAny(host, "[]") {
			return bad("server %q: want host:port, or [address]:port for IPv6", e)
		}
		servers = append(servers, net.JoinHostPort(host, port))
	}
	chroot, err := cleanRoot(u.Path)
	if err != nil {
		return bad("chroot: %v", err)
	}
	opts := []Option{WithRoot(chroot + DefaultRoot)}
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return bad("query parameter %q given %d times", name, len(vals))
		}
		switch v := vals[0]; name {
		case "session_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond {
				return bad("session_timeout=%q is not a duration of 1ms or more such as 30s", v)
			}
			opts = append(opts, WithSessionTimeout(d))
		default:
			return bad("unknown query parameter %q (known: session_timeout)", name)
		}
	}
	return servers, opts, nil
}
