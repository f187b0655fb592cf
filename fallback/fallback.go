package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Backend sends lock calls to a primary store while it is healthy and to a
// secondary store while a circuit breaker holds the primary to be down. It
// is safe for concurrent use. The zero value is not usable; call New.
type Backend struct {
	stores [2]driver.Backend // indexed by store
	names  [2]string
	cfg    config
	cb     *gobreaker.CircuitBreaker[bool]
	leases leases

	sw *switchState // which store serves acquisitions; shared with the lock kinds' views
}

// switchState is which store serves acquisitions, shared by a Backend
// and the views of the lock kinds made from it, so that they switch
// stores together, with one grace.
type switchState struct {
	mu        sync.Mutex // guards the fields below
	target    store      // the store that serves acquisitions
	epoch     uint64     // incremented at every change of target
	gateUntil time.Time  // target grants nothing before this instant
}

var (
	_ driver.Backend       = (*Backend)(nil)
	_ driver.Namer         = (*Backend)(nil)
	_ driver.AloudReleaser = (*Backend)(nil)
)

// New returns a Backend over primary (for example Redis or Redlock) and
// secondary (for example PostgreSQL), which must be distinct stores. The
// caller keeps owning both and closes them after the Backend's last call.
func New(primary, secondary driver.Backend, opts ...Option) (*Backend, error) {
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
	b := &Backend{stores: [2]driver.Backend{primary, secondary}, cfg: cfg, sw: &switchState{}} // serving the primary
	b.names = [2]string{driver.Name(primary), driver.Name(secondary)}
	b.cb = newBreaker(b)
	return b, nil
}

// Name implements driver.Namer: "fallback(primary, secondary)".
func (b *Backend) Name() string {
	return "fallback(" + b.names[primary] + ", " + b.names[secondary] + ")"
}

// State returns the breaker's state. An open breaker whose timeout has
// passed reports half-open.
func (b *Backend) State() State { return fromBreaker(b.cb.State()) }

// Serving returns the name of the store that serves new acquisitions and
// whether it still refuses them because the grace after a switch is not
// over.
func (b *Backend) Serving() (name string, inGrace bool) {
	s, _, gated := b.route()
	return b.names[s], gated
}

func (b *Backend) check(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if ttl > b.cfg.grace {
		return fmt.Errorf("%w: fallback ttl %v is longer than the switch grace %v: a lock could outlive a switch of stores", turnstile.ErrInvalidTTL, ttl, b.cfg.grace)
	}
	return ctx.Err()
}

// do runs f on store s. Calls to the primary pass through the breaker,
// which counts store errors (not "not acquired" or "not held" answers,
// not errors caused by the caller's context ending, and not refusals
// matching turnstile.ErrInvalidOption) as failures.
func (b *Backend) do(ctx context.Context, s store, f func(driver.Backend) error) error {
	if s == secondary {
		if err := f(b.stores[secondary]); err != nil {
			return fmt.Errorf("fallback: secondary %s: %w", b.names[secondary], err)
		}
		return nil
	}
	_, err := b.cb.Execute(func() (bool, error) {
		err := f(b.stores[primary])
		if err != nil && (ctx.Err() != nil || errors.Is(err, turnstile.ErrInvalidOption)) {
			// The caller gave up, or asked what no store grants (a
			// semaphore's number of permits other than the one its
			// holders hold): neither says anything about the store.
			return false, &callerDoneError{err}
		}
		return false, err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		return fmt.Errorf("%w (%s): %w", ErrPrimaryDown, b.names[primary], err)
	}
	if d, ok := errors.AsType[*callerDoneError](err); ok {
		err = d.err
	}
	return fmt.Errorf("fallback: primary %s: %w", b.names[primary], err)
}

// Acquire implements driver.Backend. It takes key in the store that
// serves acquisitions; during the grace after a switch of stores it
// answers "not acquired" without asking any store. The token is the
// granting store's own (see the package documentation).
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := b.check(ctx, ttl); err != nil {
		return 0, false, err
	}
	if b.State() == StateHalfOpen {
		b.probe(ctx, key, owner, ttl)
	}
	s, epoch, gated := b.route()
	if gated {
		return 0, false, nil
	}
	var token uint64
	var ok bool
	err := b.do(ctx, s, func(st driver.Backend) (err error) {
		token, ok, err = st.Acquire(ctx, key, owner, ttl)
		return err
	})
	if err != nil {
		// The outcome is unknown: remember the store so that a release
		// reaches it.
		b.leases.put(key, owner, lease{store: s, epoch: epoch, expires: time.Now().Add(ttl)})
		return 0, false, err
	}
	if !ok {
		return 0, false, nil
	}
	if e, _ := b.currentEpoch(); e != epoch {
		// The stores switched while the call ran: the other store may
		// grant key once its grace ends, so this lock must not be used.
		b.releaseQuietly(ctx, s, key, owner)
		return 0, false, nil
	}
	b.leases.put(key, owner, lease{store: s, epoch: epoch, expires: time.Now().Add(ttl)})
	return token, true, nil
}

// probe tests the primary while the breaker is half-open with the
// caller's own call, whose result is given up whatever it is: the
// secondary still serves acquisitions until the breaker closes. Only one
// call at a time probes; the breaker refuses the others.
func (b *Backend) probe(ctx context.Context, key, owner string, ttl time.Duration) {
	_ = b.do(ctx, primary, func(p driver.Backend) error {
		_, ok, err := p.Acquire(ctx, key, owner, ttl)
		if ok {
			_, err = p.Release(ctx, key, owner)
		}
		return err
	})
}

func (b *Backend) releaseQuietly(ctx context.Context, s store, key, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = b.stores[s].Release(ctx, key, owner)
}

// Extend implements driver.Backend. It renews a lease in the store that
// granted it, and refuses (ok=false) a lease granted before the latest
// switch of stores: the new store may grant key once grace has passed, so
// the old lock must be left to expire.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := b.check(ctx, ttl); err != nil {
		return false, err
	}
	epoch, s := b.currentEpoch()
	l, known := b.leases.get(key, owner)
	if known {
		if l.epoch != epoch {
			return false, nil
		}
		s = l.store
	}
	var ok bool
	err := b.do(ctx, s, func(st driver.Backend) (err error) {
		ok, err = st.Extend(ctx, key, owner, ttl)
		return err
	})
	if err != nil || !ok {
		return false, err
	}
	if e, _ := b.currentEpoch(); e != epoch {
		return false, nil
	}
	b.leases.put(key, owner, lease{store: s, epoch: epoch, expires: time.Now().Add(ttl)})
	return true, nil
}

// Release implements driver.Backend. It frees key in the store that
// granted the lease, or in both stores when this Backend does not know
// the lease (then the primary is skipped while the breaker holds it down).
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	return b.releaseBoth(ctx, key, owner, false)
}

// ReleaseAloud implements driver.AloudReleaser: Release with the release
// notice sent in any case by a store that sends it only when someone
// tried to take the lock meanwhile (driver.AloudReleaser).
func (b *Backend) ReleaseAloud(ctx context.Context, key, owner string) (bool, error) {
	return b.releaseBoth(ctx, key, owner, true)
}

func (b *Backend) releaseBoth(ctx context.Context, key, owner string, aloud bool) (bool, error) {
	if ctx == nil {
		return false, fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if l, known := b.leases.take(key, owner); known {
		return b.release(ctx, l.store, key, owner, aloud)
	}
	okS, errS := b.release(ctx, secondary, key, owner, aloud)
	if b.State() != StateClosed {
		return okS, errS
	}
	okP, errP := b.release(ctx, primary, key, owner, aloud)
	return okP || okS, errors.Join(errP, errS)
}

func (b *Backend) release(ctx context.Context, s store, key, owner string, aloud bool) (ok bool, err error) {
	err = b.do(ctx, s, func(st driver.Backend) (err error) {
		if aloud {
			ok, err = driver.ReleaseAloud(ctx, st, key, owner)
		} else {
			ok, err = st.Release(ctx, key, owner)
		}
		return err
	})
	return ok, err
}
