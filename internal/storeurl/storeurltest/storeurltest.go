// Package storeurltest checks how a backend's URL parser reads the hosts
// of its URLs: names, IPv4 and IPv6 addresses, alone and in lists, and
// malformed IPv6 literals.
package storeurltest

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
)

// Password is the password of the URLs that carry user information: no
// error may show it.
const Password = "QJZVWKQJZVWK"

// Hosts names what the checks need of one backend's URL parser.
type Hosts struct {
	// Schemes are the URL schemes, each checked.
	Schemes []string
	// User is set for a backend whose URLs take user information: the
	// URLs then name user "u" with Password.
	User bool
	// Path is the path the URLs need, such as "/db", or "".
	Path string
	// Port is the port of a host that names none.
	Port string
	// List is set for a backend that takes several hosts.
	List bool
	// Addrs runs the backend's parser on u and returns the addresses
	// (host:port) it would dial, in order.
	Addrs func(u *url.URL) ([]string, error)
	// Invalid is the error every parse error wraps. Default:
	// turnstile.ErrInvalidURL.
	Invalid error
}

// Check parses URLs with IPv6 literal hosts, alone and (where the backend
// takes lists) in lists, and checks the addresses; and malformed hosts,
// each of which must be an invalid URL whose error names the host part
// and shows no password. The URLs are built by hand: url.Parse refuses
// lists of IPv6 literals and some malformed literals before any backend
// sees them.
func (h Hosts) Check(t *testing.T) {
	t.Helper()
	if h.Invalid == nil {
		h.Invalid = turnstile.ErrInvalidURL
	}
	for _, scheme := range h.Schemes {
		h.check(t, scheme)
	}
}

func (h Hosts) check(t *testing.T, scheme string) {
	t.Helper()
	good := []struct {
		host string
		want []string
	}{
		{"[::1]:7000", []string{"[::1]:7000"}},
		{"[::1]", []string{"[::1]:" + h.Port}},
		{"[2001:db8::5]:7001", []string{"[2001:db8::5]:7001"}},
		{"127.0.0.1:7002", []string{"127.0.0.1:7002"}},
	}
	lists := []struct {
		host string
		want []string
	}{
		{"[::1]:7000,[::2]:7001", []string{"[::1]:7000", "[::2]:7001"}},
		{"[::1],[2001:db8::5]:7001,h3:7002", []string{"[::1]:" + h.Port, "[2001:db8::5]:7001", "h3:7002"}},
	}
	bad := []string{
		"[::1", "a]:1", "[::1]x", "[::1]:", "::1", "[h]:1", "[::1]:0", "[::1]:65536", "[::1]:port",
		"[::1]:7000,[::2", "[::1]:7000,a]:1", "[::1]:7000,", "[::1]:7000,,[::2]:7001",
	}
	if h.List {
		good = append(good, lists...)
	} else {
		for _, l := range lists {
			bad = append(bad, l.host)
		}
	}
	for _, tc := range good {
		got, err := h.Addrs(h.url(scheme, tc.host))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s://%s: addresses %q, %v; want %q", scheme, tc.host, got, err, tc.want)
		}
	}
	for _, host := range bad {
		got, err := h.Addrs(h.url(scheme, host))
		if !errors.Is(err, h.Invalid) {
			t.Errorf("%s://%s: addresses %q, %v; want an error wrapping %v", scheme, host, got, err, h.Invalid)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, Password) || !strings.Contains(msg, "host") && !strings.Contains(msg, "port") {
			t.Errorf("%s://%s: error %q shows the password or names no host or port", scheme, host, msg)
		}
	}
}

// url is a URL of h with scheme whose host part is host.
func (h Hosts) url(scheme, host string) *url.URL {
	u := &url.URL{Scheme: scheme, Host: host, Path: h.Path}
	if h.User {
		u.User = url.UserPassword("u", Password)
	}
	return u
}
