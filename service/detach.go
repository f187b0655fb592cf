package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The service's Clients wait for locks (their lines, notices, the
// store's queue) and renew the leases of Hold streams. A lease taken by
// Acquire belongs to the caller from then on: it may extend or release
// it through any instance, by its owner id alone. So the Client that
// took it must let go of it without touching the store — stop renewing
// it, and stop its line from waiting for its end — which Lease.Release
// does on a backend that pretends to release it: detached. The lock
// stays held in the store under the owner id the caller now has.
//
// Two things a Client does on its own would be wrong for such a lease,
// and the backend below rules them out:
//
//   - Handing a lock to a waiter of the same Client without the store
//     (driver.TokenRoom) gives the releasing lease's owner id to the
//     waiter. A caller holding that owner id in a handle could then
//     release the waiter's lock. The backend hides TokenRoom, so the
//     service's Clients never hand over: every grant is the store's.
//   - Nothing else: the service calls the store itself for everything a
//     handle does (Extend, Release), never through a Lease.

// detachKey marks the context of a Lease.Release that only detaches.
type detachKey struct{}

// detached returns a context under which the Client's Release of a lease
// leaves the store alone.
func detached(ctx context.Context) context.Context {
	return context.WithValue(ctx, detachKey{}, true)
}

func isDetached(ctx context.Context) bool {
	d, _ := ctx.Value(detachKey{}).(bool)
	return d
}

// storeView is a lock store as the service's Clients see it: the store,
// without TokenRoom, with a Release (and ReleaseNotice) that a detaching
// context turns into a no-op. The optional capabilities the Client
// discovers are all present; where the store lacks one, the method
// behaves as the Client treats the capability's absence (notices: an
// error, so it polls; batches: one call per renewal; ReleaseNotice: the
// plain Release, which tells every time; inspection: ErrUnsupported;
// grants that say when the store holds them: a zero time). Only
// driver.Queuer changes how a Client waits, so it is added by queuedView
// where the store has it.
type storeView struct {
	b driver.Backend
}

// viewOf wraps b for a Client of the service.
func viewOf(b driver.Backend) driver.Backend {
	v := &storeView{b: b}
	if q, ok := b.(driver.Queuer); ok {
		return &queuedView{storeView: v, q: q}
	}
	return v
}

func (v *storeView) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return v.b.Acquire(ctx, key, owner, ttl)
}

// AcquireSince implements driver.TimedAcquirer: a zero since where the
// store cannot say.
func (v *storeView) AcquireSince(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, time.Time, error) {
	return driver.AcquireSince(ctx, v.b, key, owner, ttl)
}

func (v *storeView) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return v.b.Extend(ctx, key, owner, ttl)
}

func (v *storeView) Release(ctx context.Context, key, owner string) (bool, error) {
	if isDetached(ctx) {
		return true, nil
	}
	return v.b.Release(ctx, key, owner)
}

// ReleaseNotice implements driver.NoticeReleaser. The Client releases
// through it, not Release, so it detaches as Release does: a detached
// lease stays held, and nobody was told of anything.
func (v *storeView) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	if isDetached(ctx) {
		return true, false, nil
	}
	return driver.ReleaseNotice(ctx, v.b, key, owner, n)
}

// Name implements driver.Namer.
func (v *storeView) Name() string { return driver.Name(v.b) }

// Shared implements driver.Shared.
func (v *storeView) Shared() bool {
	s, ok := v.b.(driver.Shared)
	return ok && s.Shared()
}

// errNoNotices: the store sends no release notices; a Client polls.
var errNoNotices = fmt.Errorf("%w: the store sends no release notices", turnstile.ErrUnsupported)

// Released implements driver.Notifier.
func (v *storeView) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	n, ok := v.b.(driver.Notifier)
	if !ok {
		return nil, nil, errNoNotices
	}
	return n.Released(ctx, key)
}

// ExtendMany implements driver.BatchExtender.
func (v *storeView) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	if be, ok := v.b.(driver.BatchExtender); ok {
		return be.ExtendMany(ctx, reqs)
	}
	out := make([]driver.ExtendResult, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			ok, err := v.b.Extend(ctx, r.Key, r.Owner, r.TTL)
			out[i] = driver.ExtendResult{OK: ok, Err: err}
		})
	}
	wg.Wait()
	return out
}

// Inspect implements driver.Inspector.
func (v *storeView) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	in, ok := v.b.(driver.Inspector)
	if !ok {
		return driver.LockState{}, fmt.Errorf("%w: %s cannot say who holds a lock", turnstile.ErrUnsupported, driver.Name(v.b))
	}
	return in.Inspect(ctx, key)
}

// List implements driver.Inspector.
func (v *storeView) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	in, ok := v.b.(driver.Inspector)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s cannot list locks", turnstile.ErrUnsupported, driver.Name(v.b))
	}
	return in.List(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser.
func (v *storeView) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	fr, ok := v.b.(driver.ForceReleaser)
	if !ok {
		return driver.LockState{}, fmt.Errorf("%w: %s cannot remove a lock by force", turnstile.ErrUnsupported, driver.Name(v.b))
	}
	return fr.ForceRelease(ctx, key)
}

// queuedView is a storeView of a store that queues waiters itself.
type queuedView struct {
	*storeView
	q driver.Queuer
}

// AcquireWait implements driver.Queuer.
func (v *queuedView) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	return v.q.AcquireWait(ctx, key, owner, ttl)
}

// AcquireWaitSince implements driver.TimedQueuer: a zero since where the
// store's queue cannot say.
func (v *queuedView) AcquireWaitSince(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Time, error) {
	return driver.AcquireWaitSince(ctx, v.q, key, owner, ttl)
}
