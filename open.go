package turnstile

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/memory"
)

// OpenFunc creates a backend from a URL, for a Client with the settings
// cfg says. Backends register one per scheme.
type OpenFunc func(ctx context.Context, u *url.URL, cfg driver.OpenConfig) (driver.Backend, error)

var (
	registryMu sync.RWMutex
	// mem:// is built in, so that Open("mem://") works in tests and
	// examples with nothing imported; the memory package is part of this
	// module and imports nothing but driver.
	registry = map[string]OpenFunc{"mem": openMemory}
)

// Register makes a backend available to Open under scheme. Backend
// packages call it from init, so importing them is enough:
//
//	import _ "github.com/turnstilelock/turnstile/redis"
//
// Open passes the Client's settings a store must agree with
// (driver.OpenConfig). Like sql.Register it panics if scheme is
// registered twice or open is nil: both are programming errors found at
// start-up, not inputs.
func Register(scheme string, open OpenFunc) {
	if open == nil {
		panic("turnstile: Register open func is nil for scheme " + scheme)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[scheme]; dup {
		panic("turnstile: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// openMemory opens mem://, which takes nothing after the scheme.
func openMemory(_ context.Context, u *url.URL, _ driver.OpenConfig) (driver.Backend, error) {
	var part string
	switch {
	case u.User != nil:
		part = "user information"
	case u.Host != "":
		part = "a host"
	case u.Path != "" || u.Opaque != "":
		part = "a path"
	case u.RawQuery != "" || u.ForceQuery:
		part = "query parameters"
	case u.Fragment != "":
		part = "a fragment"
	default:
		return memory.New(), nil
	}
	return nil, fmt.Errorf("%w: mem:// takes nothing after the scheme, and this URL has %s", ErrInvalidURL, part)
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s := make([]string, 0, len(registry))
	for k := range registry {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open connects to the backend named by rawURL — "redis://host:port/db",
// "mem://", and the schemes of every imported backend package — and returns
// a Client over it. Close on the Client closes the backend.
//
// Every backend URL may set the Client's lock delay with a query
// parameter, lock_delay=2s (WithLockDelay); Open takes it out of the URL
// before the backend reads it, and refuses it where the backend cannot
// keep it, or where it disagrees with a WithLockDelay option.
//
// The errors of Open never contain the URL's secrets: the password of
// its user information and the values of secret query parameters such as
// password= are masked (as xxxxx) wherever they would appear, in errors of
// the backend's driver too.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Client, error) {
	c, err := openURL(ctx, rawURL, opts)
	if err != nil {
		return nil, redact.Error(err, rawURL)
	}
	return c, nil
}

func openURL(ctx context.Context, rawURL string, opts []Option) (*Client, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	// A password cut short by an unescaped '/', '?' or '#' would have its
	// rest shown, and dialled, as a host or a path: refuse it unread.
	if redact.Ambiguous(rawURL) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, redact.ErrAmbiguous)
	}
	// The options are checked before anything is dialled, and the
	// backend learns the settings it must agree with.
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	u, err := parseURL(rawURL)
	if err != nil {
		// url.Error repeats the raw URL, password included: keep only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidURL, redact.URL(rawURL), err)
	}
	if u.Scheme == "" {
		// Without a scheme it may be no URL at all — a password given
		// by mistake — so none of it is shown.
		return nil, fmt.Errorf("%w: the %d bytes given have no scheme, so they are no backend URL (want one of %s://…)", ErrInvalidURL, len(rawURL), strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	open := registry[strings.ToLower(u.Scheme)]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w: %q (registered: %s; import the backend package to register it)", ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "))
	}
	delay, err := lockDelayFromURL(&cfg, u)
	if err != nil {
		return nil, err
	}
	if delay != nil {
		opts = append(opts[:len(opts):len(opts)], delay)
	}
	b, err := open(ctx, u, driver.OpenConfig{TTL: cfg.ttl, LockDelay: cfg.lockDelay})
	if err != nil {
		return nil, fmt.Errorf("turnstile: open %s: %w", redact.URL(rawURL), err)
	}
	c, err := New(b, opts...)
	if err != nil {
		if cl, ok := b.(interface{ Close() error }); ok {
			_ = cl.Close()
		}
		return nil, err
	}
	c.ownsBackend = true
	return c, nil
}

// parseURL is url.Parse, except that the host may be a list of hosts with
// IPv6 literals in it ("redlock://[::1]:6379,[::1]:6380"), which
// url.Parse refuses. Such a list is kept in u.Host as written; the
// backend splits and checks it.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil {
		return u, nil
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, err
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	at := strings.LastIndexByte(authority, '@') + 1
	hosts := authority[at:]
	if !strings.Contains(hosts, ",") || !strings.Contains(hosts, "[") || strings.Trim(hosts, hostListChars) != "" {
		return nil, err
	}
	u, perr := url.Parse(scheme + "://" + authority[:at] + "hosts" + rest[end:])
	if perr != nil {
		return nil, err
	}
	u.Host = hosts
	return u, nil
}

// hostListChars are the bytes a host list may hold: names, IPv4 and IPv6
// addresses with zones, ports, brackets and commas.
const hostListChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]%,"
