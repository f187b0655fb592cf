package fallback

import (
	"errors"
	"fmt"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds of a fallback pair are pairs of the two stores' views of
// that kind, made with the same settings (driver.KindConfig), behind the pair's own breaker and switch: a view's calls to
// the primary count for and against the one breaker, and a switch of
// stores switches the plain lock and every view together, with one
// grace. What keeps a key from having two holders across a switch holds
// for every kind as for the plain lock: the store switched to grants no
// lock, permit, read or write hold during the grace, holds taken before
// the switch cannot be renewed, and the grace outlasts every TTL, so
// every hold of the store being left has expired before the other store
// grants one. A semaphore's number of permits is stored in each store
// (both refuse another number while their permits are held).
//
// A kind is offered when both stores offer it; otherwise the error
// matches turnstile.ErrUnsupported and names the store without it. The
// fair lock is refused (ErrFair).

var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
	_ driver.Fairer      = (*Backend)(nil)
)

// ErrFair is why a fallback pair offers no fair lock: each store keeps
// its own queue, so the waiters queued in the store being left lose their
// place at a switch, and the order the kind promises does not hold across
// it. It matches turnstile.ErrUnsupported.
var ErrFair = fmt.Errorf("%w: fallback has no fair lock: each store keeps its own queue of waiters, and a switch of stores would drop the queued waiters' order", turnstile.ErrUnsupported)

// ReentrantView implements driver.Reentranter: the pair of the stores'
// reentrant views. Re-entries go to the store that serves acquisitions,
// as every acquisition does; a re-entry during the grace after a switch
// waits like any acquisition.
func (b *Backend) ReentrantView(cfg driver.KindConfig) (driver.Backend, error) {
	p, s, err := b.views("reentrant lock", func(st driver.Backend) (driver.Backend, error) { return reentrant(st, cfg) })
	if err != nil {
		return nil, err
	}
	return b.view(p, s), nil
}

// SemaphoreView implements driver.Semaphorer: the pair of the stores'
// semaphores of cfg.Permits permits. It is driver.Shared.
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	p, s, err := b.views("semaphore", func(st driver.Backend) (driver.Backend, error) { return semaphore(st, cfg) })
	if err != nil {
		return nil, err
	}
	return sharedView{b.view(p, s)}, nil
}

// ReadWriteView implements driver.ReadWriter: the pairs of the stores'
// read sides and of their write sides, switching together. The read
// side is driver.Shared. Waiting writers' claims last cfg.WriterClaim
// on both stores.
func (b *Backend) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	var rs, ws [2]driver.Backend
	for i, st := range b.stores {
		r, w, err := readWrite(st, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("fallback: read-write lock on the %s %s: %w", store(i), b.names[i], err)
		}
		rs[i], ws[i] = r, w
	}
	return sharedView{b.view(rs[primary], rs[secondary])}, b.view(ws[primary], ws[secondary]), nil
}

// FairView implements driver.Fairer: it returns ErrFair.
func (b *Backend) FairView(driver.KindConfig) (driver.Backend, error) { return nil, ErrFair }

// A store's view of a kind is made through turnstile's function of the
// kind, as callers make theirs, with the pair's view's settings: so a
// store without the kind is refused as it would be on its own.

func reentrant(st driver.Backend, _ driver.KindConfig) (driver.Backend, error) {
	return turnstile.Reentrant(st) // the kind has no settings yet
}

func semaphore(st driver.Backend, cfg driver.KindConfig) (driver.Backend, error) {
	return turnstile.Semaphore(st, cfg.Permits)
}

func readWrite(st driver.Backend, cfg driver.KindConfig) (read, write driver.Backend, err error) {
	return turnstile.ReadWrite(st, turnstile.WithWriterClaim(cfg.WriterClaim))
}

// views returns the two stores' views that kind returns.
func (b *Backend) views(kind string, view func(driver.Backend) (driver.Backend, error)) (p, s driver.Backend, err error) {
	var out [2]driver.Backend
	for i, st := range b.stores {
		v, err := view(st)
		if err != nil {
			if errors.Is(err, turnstile.ErrUnsupported) {
				return nil, nil, fmt.Errorf("fallback: %s: the %s %s has none: %w", kind, store(i), b.names[i], err)
			}
			return nil, nil, fmt.Errorf("fallback: %s on the %s %s: %w", kind, store(i), b.names[i], err)
		}
		out[i] = v
	}
	return out[primary], out[secondary], nil
}

// view is the pair of p and s behind b's breaker and state.
func (b *Backend) view(p, s driver.Backend) *Backend {
	return &Backend{
		stores:    [2]driver.Backend{p, s},
		names:     [2]string{driver.Name(p), driver.Name(s)},
		cfg:       b.cfg,
		reg:       b.reg,
		regPrefix: b.regPrefix,
		pair:      b.pair,
	}
}

// sharedView is a view whose locks several owners hold (a semaphore, the
// read side): a Client's waiters contend on their own (driver.Shared).
type sharedView struct{ *Backend }

// Shared implements driver.Shared.
func (sharedView) Shared() bool { return true }
