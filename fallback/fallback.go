package fallback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Backend sends lock calls to a primary store while it is healthy and to a
// secondary store while the primary is down, switching stores as the
// pair's state, kept in the secondary, says. It is safe for concurrent
// use. The zero value is not usable; call New.
type Backend struct {
	stores [2]driver.Backend // indexed by store
	names  [2]string
	cfg    config
	leases leases

	// reg is the plain secondary, which keeps the pair's state (the
	// register) under regPrefix; pair is what this process knows of that
	// state, and its breaker. Both are shared with the views of the lock
	// kinds.
	reg       driver.Backend
	regPrefix string
	pair      *pairState
}

var (
	_ driver.Backend        = (*Backend)(nil)
	_ driver.Namer          = (*Backend)(nil)
	_ driver.NoticeReleaser = (*Backend)(nil)
)

// New returns a Backend over primary (for example Redis or Redlock) and
// secondary (for example PostgreSQL), which must be distinct stores. The
// caller keeps owning both and closes them after the Backend's last call.
// The secondary keeps the pair's state when it is a driver.Inspector
// that says how long a lock lasts (PostgreSQL, MySQL, Redis and memory
// do); else each process switches on its own breaker.
func New(primary, secondary driver.Backend, opts ...Option) (*Backend, error) {
	b, err := newBackend(primary, secondary, opts)
	if err != nil {
		return nil, err
	}
	b.pair.answered.Store(true) // the caller has connected it
	return b, nil
}

func newBackend(primary, secondary driver.Backend, opts []Option) (*Backend, error) {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if driver.IsNil(primary) || driver.IsNil(secondary) {
		return nil, fmt.Errorf("%w: fallback needs a primary and a secondary backend", turnstile.ErrNilBackend)
	}
	if driver.Same(primary, secondary) {
		return nil, fmt.Errorf("%w: fallback primary and secondary are the same backend", turnstile.ErrInvalidOption)
	}
	b := &Backend{
		stores: [2]driver.Backend{primary, secondary}, cfg: cfg,
		reg: secondary, regPrefix: registerPrefix(cfg.pair), pair: &pairState{},
	}
	b.names = [2]string{driver.Name(primary), driver.Name(secondary)}
	b.pair.cb.Store(newBreaker(b))
	return b, nil
}

// Name implements driver.Namer: "fallback(primary, secondary)".
func (b *Backend) Name() string {
	return "fallback(" + b.names[primary] + ", " + b.names[secondary] + ")"
}

// HoldsTTL implements driver.TTLHolder when both stores do; the pair's
// switch grace must then cover the TTL plus the lock delay (MaxTTL). A
// pair of lock kinds' views does not offer it.
func (b *Backend) HoldsTTL() bool {
	return driver.HoldsTTL(b.stores[primary]) && driver.HoldsTTL(b.stores[secondary])
}

// State returns the state of this process's breaker, its view of the
// primary's health. An open breaker whose timeout has passed reports
// half-open.
func (b *Backend) State() State { return fromBreaker(b.pair.breaker().State()) }

// Serving returns the name of the store that serves new acquisitions, or
// will once the grace of a switch has run, and whether that grace runs
// now, as far as this process knows: it reads the pair's state in the
// secondary only when it locks.
func (b *Backend) Serving() (name string, inGrace bool) {
	s := b.pair.snapshot()
	return b.names[s.phase.target()], s.phase.switching() && time.Now().Before(s.until)
}

func (b *Backend) check(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if limit := MaxTTL(b.cfg.grace); ttl > limit {
		return fmt.Errorf("%w: fallback ttl %v is longer than %v, the most the switch grace %v allows (fallback.MaxTTL): a lease could outlive a switch of stores", turnstile.ErrInvalidTTL, ttl, limit, b.cfg.grace)
	}
	return ctx.Err()
}

// Acquire implements driver.Backend. It takes key in the store that
// serves acquisitions; during the grace of a switch of stores it answers
// "not acquired" without asking any store, and so does the call whose
// failure opened the breaker (the pair then switches). The token is the
// granting store's own (see the package documentation).
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := b.check(ctx, ttl); err != nil {
		return 0, false, err
	}
	d, err := b.route(ctx, ttl, true)
	if err != nil {
		return 0, false, err
	}
	if d.probe {
		b.probe(ctx, key, owner, ttl)
		if d, err = b.route(ctx, ttl, false); err != nil {
			return 0, false, err
		}
	}
	if d.gated || d.stale {
		return 0, false, nil
	}
	var token uint64
	var ok bool
	err = b.do(ctx, d.store, func(st driver.Backend) (err error) {
		token, ok, err = st.Acquire(ctx, key, owner, ttl)
		return err
	})
	if err != nil {
		// The outcome is unknown: remember the store so that a release
		// reaches it.
		b.leases.put(key, owner, lease{store: d.store, epoch: d.epoch, expires: time.Now().Add(ttl)})
		if d.store == primary && ctx.Err() == nil && b.State() != StateClosed && b.failover(ctx) {
			// This failure opened the breaker: the pair switches to the
			// secondary, which grants once the grace has run. A lock the
			// primary may have granted has no holder and expires there.
			return 0, false, nil
		}
		return 0, false, err
	}
	if !ok {
		return 0, false, nil
	}
	if b.pair.epochNow() != d.epoch {
		// The stores switched while the call ran: the other store may
		// grant key once its grace ends, so this lock must not be used.
		b.releaseQuietly(ctx, d.store, key, owner)
		return 0, false, nil
	}
	b.leases.put(key, owner, lease{store: d.store, epoch: d.epoch, expires: time.Now().Add(ttl)})
	return token, true, nil
}

func (b *Backend) releaseQuietly(ctx context.Context, s store, key, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = b.stores[s].Release(ctx, key, owner)
}

// Extend implements driver.Backend. It renews a lease in the store that
// granted it, and refuses (ok=false) a lease granted before the latest
// switch of stores: the new store may grant key once grace has passed, so
// the old lock must be left to expire. When the pair's state could not
// be read in time to renew on it, it returns an error and the Client
// tries again.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := b.check(ctx, ttl); err != nil {
		return false, err
	}
	d, err := b.route(ctx, ttl, false)
	if err != nil {
		return false, err
	}
	s := d.store
	if l, known := b.leases.get(key, owner); known {
		if l.epoch != d.epoch {
			return false, nil
		}
		s = l.store
	} else if d.gated {
		return false, nil
	}
	if d.stale {
		return false, errStale
	}
	var ok bool
	err = b.do(ctx, s, func(st driver.Backend) (err error) {
		ok, err = st.Extend(ctx, key, owner, ttl)
		return err
	})
	if err != nil || !ok {
		return false, err
	}
	if b.pair.epochNow() != d.epoch {
		return false, nil
	}
	b.leases.put(key, owner, lease{store: s, epoch: d.epoch, expires: time.Now().Add(ttl)})
	return true, nil
}

// Release implements driver.Backend. It frees key in the store that
// granted the lease, or in both stores when this Backend does not know
// the lease (then the primary is skipped while the breaker holds it down).
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	ok, _, err := b.releaseBoth(ctx, key, owner, driver.NoticeIfTried)
	return ok, err
}

// ReleaseNotice implements driver.NoticeReleaser: Release with the
// release notice sent as n says by a store that sends it only when
// someone tried to take the lock meanwhile (driver.NoticeReleaser), and
// whether the store said someone had (a store that cannot tell counts as
// told).
func (b *Backend) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	return b.releaseBoth(ctx, key, owner, n)
}

func (b *Backend) releaseBoth(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	if ctx == nil {
		return false, false, fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if l, known := b.leases.take(key, owner); known {
		return b.release(ctx, l.store, key, owner, n)
	}
	okS, triedS, errS := b.release(ctx, secondary, key, owner, n)
	if b.State() != StateClosed {
		return okS, triedS, errS
	}
	okP, triedP, errP := b.release(ctx, primary, key, owner, n)
	return okP || okS, triedP || triedS, errors.Join(errP, errS)
}

func (b *Backend) release(ctx context.Context, s store, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	err = b.do(ctx, s, func(st driver.Backend) (err error) {
		ok, tried, err = driver.ReleaseNotice(ctx, st, key, owner, n)
		return err
	})
	return ok, tried, err
}
