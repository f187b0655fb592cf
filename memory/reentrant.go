package memory

import (
	"context"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Reentrant is the view of a Backend that turnstile.Reentrant returns:
// locks the same owner may take again while it holds them. Each
// acquisition counts, and only the release that matches the first frees
// the lock. Every re-entry returns the token of the first acquisition. A re-entry and Extend make the
// lock live at least their TTL from now, never less than it had, since
// each of the owner's leases is renewed on its own schedule. Give the
// Client turnstile.WithOwner(id) for the calls that may nest.
type Reentrant struct{ b *Backend }

var (
	_ driver.Backend       = (*Reentrant)(nil)
	_ driver.BatchExtender = (*Reentrant)(nil)
	_ driver.Namer         = (*Reentrant)(nil)
	_ driver.Inspector     = (*Reentrant)(nil)
	_ driver.ForceReleaser = (*Reentrant)(nil)
)

type reentrantHold struct {
	owner   string
	count   int
	token   uint64
	expires time.Time
}

// Name implements driver.Namer.
func (r *Reentrant) Name() string { return "memory reentrant" }

// live returns key's hold if it has not expired, dropping it if it has.
func (r *Reentrant) live(key string, now time.Time) *reentrantHold {
	h := r.b.kinds.reentrant[key]
	if h != nil && !now.Before(h.expires) {
		delete(r.b.kinds.reentrant, key)
		return nil
	}
	return h
}

// Acquire implements driver.Backend: it takes key for owner, or counts
// one more acquisition if owner holds it.
func (r *Reentrant) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	k := &r.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	if h := r.live(key, now); h != nil {
		if h.owner != owner {
			return 0, false, nil
		}
		h.count++
		h.expires = later(h.expires, now.Add(ttl))
		return h.token, true, nil
	}
	tok := r.b.tokens.Add(1)
	k.reentrant[key] = &reentrantHold{owner: owner, count: 1, token: tok, expires: now.Add(ttl)}
	return tok, true, nil
}

// Extend implements driver.Backend: it renews owner's whole hold.
func (r *Reentrant) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := &r.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := r.live(key, now)
	if h == nil || h.owner != owner {
		return false, nil
	}
	h.expires = later(h.expires, now.Add(ttl))
	return true, nil
}

// ExtendMany implements driver.BatchExtender.
func (r *Reentrant) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, r.Extend)
}

// Release implements driver.Backend: it counts one release of owner's
// hold, and frees key at the last.
func (r *Reentrant) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := &r.b.kinds
	k.lock()
	defer k.mu.Unlock()
	h := r.live(key, time.Now())
	if h == nil || h.owner != owner {
		return false, nil
	}
	if h.count--; h.count == 0 {
		delete(k.reentrant, key)
	}
	return true, nil
}

func reentrantState(key string, h *reentrantHold, now time.Time) driver.LockState {
	st := driver.LockState{Key: key, Waiters: -1}
	if h == nil || !now.Before(h.expires) {
		return st
	}
	st.Held, st.Token = true, h.token
	st.Holders = []driver.Holder{{Owner: h.owner, Token: h.token, TTL: h.expires.Sub(now)}}
	return st
}

// holds are the Reentrant holds of r's Backend.
func (r *Reentrant) holds() kindHolds[*reentrantHold] {
	return kindHolds[*reentrantHold]{r.b, func(k *kinds) map[string]*reentrantHold { return k.reentrant }, reentrantState}
}

// Inspect implements driver.Inspector: the holder, with the token of its
// first acquisition.
func (r *Reentrant) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return r.holds().inspect(ctx, key)
}

// List implements driver.Inspector.
func (r *Reentrant) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return r.holds().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: it removes the hold
// whatever its count. The returned Token is the token counter, which
// every later token passes.
func (r *Reentrant) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return r.holds().forceRelease(ctx, key)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
