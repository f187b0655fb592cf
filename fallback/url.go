package fallback

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	fallback://?primary=URL&secondary=URL[&grace=31s&trip_after=5&open_timeout=5s&pair=NAME]
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
// WithOpenTimeout, pair WithPair. Without grace, the grace is
// DefaultGrace or, for a Client TTL (turnstile.WithTTL) too long for it,
// the shortest whole number of seconds whose MaxTTL covers the TTL; a
// grace too short for the TTL is refused. Every process of a pair must
// use the same grace: with Clients of several TTLs, give it.
//
// Opening succeeds when either store can be reached: a store that
// refuses the connection or does not answer (within a second of the
// other store having connected) is connected by a later call, at most
// once a second (see the package documentation for what a process that
// never reached the primary does). Any other error of a store — a bad
// URL, refused credentials or TLS, an unknown host — fails Open, and so
// does neither store answering: the error then names both.
var urlForm = storeurl.Form{Schemes: []string{"fallback"}, Shape: "?primary=URL&secondary=URL", Users: storeurl.UserRefused, Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.Register("fallback", open)
}

// urlConfig is what a fallback:// URL says.
type urlConfig struct {
	primary, secondary string
	opts               []Option
	graceSet           bool
	grace              time.Duration
	pair               string
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
			"pair":         storeurl.Store(&c.pair, pairName),
		}); err != nil {
			return err
		}
		if c.pair != "" {
			c.opts = append(c.opts, WithPair(c.pair))
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

// pairName reads the pair= parameter.
func pairName(v string) (string, error) { return v, checkPairName(v) }

// graceFor is the grace a Client with lease TTL ttl needs: DefaultGrace,
// or the shortest whole number of seconds whose MaxTTL is at least ttl
// when that is longer.
func graceFor(ttl time.Duration) time.Duration {
	g := max(DefaultGrace, (ttl*50/49 + time.Second - 1).Truncate(time.Second))
	for MaxTTL(g) < ttl {
		g += time.Second
	}
	return g
}
