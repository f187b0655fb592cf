package fallback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
)

// urlBackend is a Backend opened from a URL: it owns the two stores, and
// Close closes them.
type urlBackend struct {
	*Backend
	closers [2]func() error
}

// Close closes both stores.
func (b *urlBackend) Close() error {
	return errors.Join(b.closers[primary](), b.closers[secondary]())
}

// memberWait is how long Open waits for a store that has not answered
// once the other one has connected: a store that does not answer must
// not hold up a pair that the other can serve. Its attempt goes on
// without Open, and a later call uses what it gets.
const memberWait = time.Second

// errSlow is the error of a store that had not connected memberWait
// after the other one had.
var errSlow = errors.New("no answer yet")

// open is what turnstile.Open calls for a fallback:// URL: it opens both
// inner URLs, at the same time, for a Client with the same TTL.
func open(ctx context.Context, u *url.URL, oc driver.OpenConfig) (driver.Backend, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	// A lock lasts its TTL plus the lock delay in the stores.
	hold := oc.TTL + oc.LockDelay
	grace := graceFor(hold)
	if c.graceSet {
		if limit := MaxTTL(c.grace); hold > limit {
			return nil, fmt.Errorf("%w: the lease TTL %v (with the lock delay %v) is longer than %v, the most grace=%v in the URL allows (fallback.MaxTTL): a lock could outlive a switch of stores; use a shorter TTL, or raise grace (or leave it out: it then covers the TTL)",
				turnstile.ErrInvalidTTL, oc.TTL, oc.LockDelay, limit, c.grace)
		}
		grace = c.grace
	}
	var members [2]*lazyStore
	for i, raw := range []string{c.primary, c.secondary} {
		members[i] = &lazyStore{name: redact.URL(raw), dial: func(ctx context.Context) (*turnstile.Client, error) {
			return turnstile.Open(ctx, raw, turnstile.WithTTL(oc.TTL), turnstile.WithLockDelay(oc.LockDelay))
		}}
	}
	closeAll := func() {
		for _, m := range members {
			_ = m.Close()
		}
	}
	errs, err := openBoth(ctx, members)
	if err != nil {
		closeAll()
		return nil, err
	}
	var stores [2]driver.Backend
	var closers [2]func() error
	for i, m := range members {
		if errs[i] == nil {
			cl, _ := m.connected()
			stores[i], closers[i] = cl.Backend(), cl.Close
			continue
		}
		if !unreachable(errs[i]) {
			closeAll()
			// err names the inner URL, with its password masked.
			return nil, fmt.Errorf("fallback %s: %w", store(i), errs[i])
		}
		stores[i], closers[i] = m, m.Close
	}
	if errs[primary] != nil && errs[secondary] != nil {
		closeAll()
		return nil, fmt.Errorf("fallback: neither store could be reached: primary: %w; secondary: %w", errs[primary], errs[secondary])
	}
	b, err := newBackend(stores[primary], stores[secondary], append(c.opts, WithGrace(grace)))
	if err != nil {
		closeAll()
		return nil, err
	}
	b.pair.answered.Store(errs[primary] == nil)
	return &urlBackend{Backend: b, closers: closers}, nil
}

// openBoth starts connecting both stores and waits until both attempts
// have ended, or one store has connected and the other has not within
// memberWait: its error is then errSlow, and its attempt goes on. It
// returns each store's error, or ctx's if ctx ends first.
func openBoth(ctx context.Context, members [2]*lazyStore) ([2]error, error) {
	var done [2]<-chan struct{}
	for i, m := range members {
		m.mu.Lock()
		done[i] = m.startLocked(ctx)
		m.mu.Unlock()
	}
	var errs [2]error
	var ended [2]bool
	var slow <-chan time.Time
	for !ended[primary] || !ended[secondary] {
		select {
		case <-done[primary]:
			ended[primary], done[primary] = true, nil
		case <-done[secondary]:
			ended[secondary], done[secondary] = true, nil
		case <-slow:
			for i := range ended {
				if !ended[i] {
					ended[i], errs[i] = true, fmt.Errorf("%w within %v of the other store", errSlow, memberWait)
				}
			}
			continue
		case <-ctx.Done():
			return errs, ctx.Err()
		}
		for i, m := range members {
			if !ended[i] || errs[i] != nil {
				continue
			}
			if _, err := m.connected(); err != nil {
				errs[i] = err
			} else if slow == nil && !ended[1-i] {
				timer := time.NewTimer(memberWait)
				defer timer.Stop()
				slow = timer.C
			}
		}
	}
	return errs, nil
}

// unreachable reports whether err, from opening a store, says that
// nothing answered at its address — refused or reset connections,
// unreachable hosts or networks, timeouts — rather than that something
// answered and refused (credentials, TLS, permissions) or that the URL
// is wrong (an unknown host among them).
func unreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return false
	}
	if errors.Is(err, errSlow) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
