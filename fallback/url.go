package fallback

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	fallback://?primary=URL&secondary=URL[&grace=31s&trip_after=5&open_timeout=5s]
//
// primary and secondary are the URLs of the two stores, each one query
// value: percent-encode it as url.QueryEscape does, or at least its '%',
// '&', '+' and '#' (a URL without those, such as redis://127.0.0.1:6379 or
// postgres://u@db/locks?sslmode=disable, may be written as it is). For
// example:
//
//	fallback://?primary=redis://127.0.0.1:6379&secondary=postgres%3A%2F%2Fapp%3As3cret%40db%2Flocks%3Fsslmode%3Ddisable
//
// Errors and messages show both inner URLs with their passwords masked,
// and an error of one of them says which. A fallback URL cannot be an
// inner URL.
//
// grace is WithGrace, trip_after WithTripAfter, open_timeout
// WithOpenTimeout. Without grace, the grace is DefaultGrace or, for a
// Client TTL (turnstile.WithTTL) too long for it, the TTL plus its drift
// allowance rounded up to a second; a grace shorter than the TTL is
// refused.
var urlForm = storeurl.Form{Schemes: []string{"fallback"}, Shape: "?primary=URL&secondary=URL", Users: storeurl.UserRefused, Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.RegisterConfig("fallback", open)
}

// urlConfig is what a fallback:// URL says.
type urlConfig struct {
	primary, secondary string
	opts               []Option
	graceSet           bool
	grace              time.Duration
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets, or those of the inner URLs (the result then means nothing).
func parseURL(u *url.URL) (c urlConfig, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) error {
		if u.Host != "" || (u.Path != "" && u.Path != "/") {
			return errors.New("want fallback://?primary=URL&secondary=URL: the stores are query parameters, not a host or path")
		}
		if err := r.Params(map[string]storeurl.Param{
			"primary":      storeurl.Store(&c.primary, storeurl.String),
			"secondary":    storeurl.Store(&c.secondary, storeurl.String),
			"grace":        storeurl.Store(&c.grace, storeurl.DurationIn(time.Millisecond, 24*time.Hour, "31s")),
			"trip_after":   storeurl.Append(&c.opts, storeurl.IntIn(1, 1<<20), WithTripAfter),
			"open_timeout": storeurl.Append(&c.opts, storeurl.DurationIn(time.Millisecond, time.Hour, "5s"), WithOpenTimeout),
		}); err != nil {
			return err
		}
		c.graceSet = u.Query().Has("grace")
		for _, in := range []struct{ name, raw string }{{"primary", c.primary}, {"secondary", c.secondary}} {
			if err := checkInner(in.name, in.raw); err != nil {
				return err
			}
		}
		if c.primary == c.secondary {
			return fmt.Errorf("primary and secondary are the same store %s: want two distinct stores", redact.URL(c.primary))
		}
		return nil
	})
	return c, err
}

// checkInner checks what can be told of an inner URL without opening it.
func checkInner(name, raw string) error {
	if raw == "" {
		return fmt.Errorf("no %s: want fallback://?primary=URL&secondary=URL", name)
	}
	// Before the inner URL is shown or opened: see redact.Ambiguous.
	if redact.Ambiguous(raw) {
		return fmt.Errorf("%s: %w", name, redact.ErrAmbiguous)
	}
	scheme, _, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" {
		return fmt.Errorf("%s %s has no scheme (percent-encode an inner URL with '&', '+', '%%' or '#' in it)", name, redact.URL(raw))
	}
	if strings.EqualFold(scheme, "fallback") {
		return fmt.Errorf("%s %s is itself a fallback store", name, redact.URL(raw))
	}
	return nil
}

// graceFor is the grace a Client with lease TTL ttl needs: DefaultGrace,
// or the TTL with its drift allowance (1 % + 2 ms, as turnstile's
// default) rounded up to a second when that is longer.
func graceFor(ttl time.Duration) time.Duration {
	need := (ttl + ttl/100 + 2*time.Millisecond + time.Second - 1).Truncate(time.Second)
	return max(DefaultGrace, need)
}

// urlBackend is a Backend opened from a URL: it owns the two stores, and
// Close closes them.
type urlBackend struct {
	*Backend
	clients [2]*turnstile.Client
}

// Close closes both stores.
func (b *urlBackend) Close() error {
	return errors.Join(b.clients[primary].Close(), b.clients[secondary].Close())
}

// open is what turnstile.Open calls for a fallback:// URL: it opens both
// inner URLs for a Client with the same TTL.
func open(ctx context.Context, u *url.URL, oc turnstile.OpenConfig) (driver.Backend, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	grace := graceFor(oc.TTL)
	if c.graceSet {
		if oc.TTL > c.grace {
			return nil, fmt.Errorf("%w: the lease TTL %v is longer than grace=%v in the URL: a lock could outlive a switch of stores; use a TTL of at most %v, or raise grace (or leave it out: it then covers the TTL)",
				turnstile.ErrInvalidTTL, oc.TTL, c.grace, c.grace)
		}
		grace = c.grace
	}
	var clients [2]*turnstile.Client
	for i, in := range []struct{ name, raw string }{{"primary", c.primary}, {"secondary", c.secondary}} {
		cl, err := turnstile.Open(ctx, in.raw, turnstile.WithTTL(oc.TTL))
		if err != nil {
			for _, o := range clients[:i] {
				_ = o.Close()
			}
			// err names the inner URL, with its password masked.
			return nil, fmt.Errorf("fallback %s: %w", in.name, err)
		}
		clients[i] = cl
	}
	b, err := New(clients[primary].Backend(), clients[secondary].Backend(), append(c.opts, WithGrace(grace))...)
	if err != nil {
		_ = clients[primary].Close()
		_ = clients[secondary].Close()
		return nil, err
	}
	return &urlBackend{Backend: b, clients: clients}, nil
}
