package memory

import (
	"context"
	"slices"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// defaultFairPoll is how often the first waiter looks at the lock when
// no release through the Fair view woke it (plain releases and expiries
// send no notice), unless turnstile.WithPollInterval says otherwise.
const defaultFairPoll = 5 * time.Millisecond

// Fair is the view of a Backend that turnstile.Fair returns: it hands
// each key's lock to its waiters in the order they came: a driver.Queuer, so a Client over it waits in
// the queue instead of retrying. The lock is the plain lock itself — the
// same entry, owner and token — so fair and plain callers exclude each
// other; plain callers do not queue, though, and may take the lock ahead
// of the queue when it is free. Acquire (TryAcquire) takes the lock only
// when nobody waits.
type Fair struct {
	b    *Backend
	poll time.Duration
}

var (
	_ driver.Backend       = (*Fair)(nil)
	_ driver.Queuer        = (*Fair)(nil)
	_ driver.BatchExtender = (*Fair)(nil)
	_ driver.Namer         = (*Fair)(nil)
	_ driver.Inspector     = (*Fair)(nil)
	_ driver.ForceReleaser = (*Fair)(nil)
)

// fairQueue is one key's waiters, first first. changed is closed, and
// replaced, whenever the queue changes or the lock is released through
// the view.
type fairQueue struct {
	waiters []string
	changed chan struct{}
}

// Name implements driver.Namer.
func (f *Fair) Name() string { return "memory fair" }

// wake tells key's waiters that something changed. The caller holds the
// kinds' lock.
func (f *Fair) wake(key string) {
	if q := f.b.kinds.queues[key]; q != nil {
		close(q.changed)
		q.changed = make(chan struct{})
	}
}

// Waiting returns how many waiters key's queue holds.
func (f *Fair) Waiting(key string) int {
	k := &f.b.kinds
	k.lock()
	defer k.mu.Unlock()
	if q := k.queues[key]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// Acquire implements driver.Backend: it takes key for owner if it is
// free and nobody waits for it.
func (f *Fair) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	k := &f.b.kinds
	k.lock()
	defer k.mu.Unlock()
	if q := k.queues[key]; q != nil && len(q.waiters) > 0 && q.waiters[0] != owner {
		return 0, false, nil
	}
	return f.b.Acquire(ctx, key, owner, ttl)
}

// AcquireWait implements driver.Queuer: owner joins key's queue and waits
// until it is first and the lock is free, then takes it and leaves the
// queue. It reports its place to driver.PositionFunc(ctx) whenever it
// changes. When ctx is done it leaves the queue and returns ctx.Err().
func (f *Fair) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	report := driver.PositionFunc(ctx)
	k := &f.b.kinds
	k.lock()
	q := k.queues[key]
	if q == nil {
		q = &fairQueue{changed: make(chan struct{})}
		k.queues[key] = q
	}
	if !slices.Contains(q.waiters, owner) {
		q.waiters = append(q.waiters, owner)
	}
	k.mu.Unlock()
	defer f.leave(key, owner)

	timer := time.NewTimer(f.poll)
	defer timer.Stop()
	reported := 0
	for {
		k.lock()
		q := k.queues[key]
		pos := slices.Index(q.waiters, owner) + 1
		if pos == 1 {
			if tok, ok, err := f.b.Acquire(ctx, key, owner, ttl); ok || err != nil {
				k.mu.Unlock()
				return tok, err
			}
		}
		changed := q.changed
		k.mu.Unlock()
		if pos != reported && report != nil {
			report(pos)
		}
		reported = pos
		timer.Reset(f.poll)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		case <-timer.C:
		}
	}
}

// leave takes owner out of key's queue and wakes the others.
func (f *Fair) leave(key, owner string) {
	k := &f.b.kinds
	k.lock()
	defer k.mu.Unlock()
	q := k.queues[key]
	if q == nil {
		return
	}
	if i := slices.Index(q.waiters, owner); i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
	}
	f.wake(key)
	if len(q.waiters) == 0 {
		delete(k.queues, key)
	}
}

// Extend implements driver.Backend: the plain lock's.
func (f *Fair) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return f.b.Extend(ctx, key, owner, ttl)
}

// ExtendMany implements driver.BatchExtender.
func (f *Fair) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return f.b.ExtendMany(ctx, reqs)
}

// Release implements driver.Backend: the plain lock's release, which
// wakes the first waiter at once.
func (f *Fair) Release(ctx context.Context, key, owner string) (bool, error) {
	ok, err := f.b.Release(ctx, key, owner)
	k := &f.b.kinds
	k.lock()
	f.wake(key)
	k.mu.Unlock()
	return ok, err
}

// Inspect implements driver.Inspector: the plain lock's state, with the
// number of waiters.
func (f *Fair) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	st, err := f.b.Inspect(ctx, key)
	if err == nil {
		st.Waiters = f.Waiting(key)
	}
	return st, err
}

// List implements driver.Inspector: the plain lock's, with each lock's
// number of waiters.
func (f *Fair) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	states, more, err := f.b.List(ctx, prefix, limit)
	for i := range states {
		states[i].Waiters = f.Waiting(states[i].Key)
	}
	return states, more, err
}

// ForceRelease implements driver.ForceReleaser: the plain lock's, which
// wakes the first waiter.
func (f *Fair) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	st, err := f.b.ForceRelease(ctx, key)
	k := &f.b.kinds
	k.lock()
	f.wake(key)
	k.mu.Unlock()
	return st, err
}
