package redis

import (
	"context"
	_ "embed" // the Lua scripts
	"errors"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

var (
	//go:embed fair_acquire.lua
	fairAcquireLua string
	//go:embed fair_leave.lua
	fairLeaveLua string
	//go:embed fair_position.lua
	fairPositionLua string

	fairAcquire  = newKindScript(tokenLua + fairAcquireLua)
	fairLeave    = newKindScript(fairLeaveLua)
	fairPosition = newKindScript(fairPositionLua)
)

// Defaults of a Fair lock, unless turnstile.WithWaiterTimeout and
// turnstile.WithPollInterval say otherwise.
const (
	// DefaultWaiterTimeout is how long a waiter keeps its place without a
	// heartbeat (a crashed process's waiters age out after it).
	DefaultWaiterTimeout = 5 * time.Second
	// DefaultFairPoll is how often the first two waiters look again when
	// no release notice comes (one was lost, or the holder's lock
	// expired).
	DefaultFairPoll = 200 * time.Millisecond
)

// Fair is the view of a Backend that turnstile.Fair returns: it hands
// each key's lock to its waiters in the order they came, across
// processes. It is a driver.Queuer, so a Client over it waits in the
// queue instead of retrying. The lock is the plain lock itself — the
// same Redis key and owner value, the same fence — so fair and plain
// callers exclude each other; plain callers do not queue, though, and
// may take the lock ahead of the queue when it is free.
//
// The queue of key K is the sorted set P{K}:queue of waiting owners,
// scored by arrival number from the counter P{K}:queue:seq. A waiter
// renews its heartbeat in P{K}:queue:alive every third of the waiter
// timeout (turnstile.WithWaiterTimeout); a waiter whose heartbeat stops
// — its process crashed — ages out after the timeout, at most 10 per
// script call. The first waiter takes the lock when it is free and
// leaves the queue in the same script. Waiters wake on the release
// notices the plain lock publishes; the first two also poll
// (turnstile.WithPollInterval), since notices may be lost and an expired
// lock sends none. Waiters further back refresh their place on notices
// when they are near the front and on every heartbeat, and tell it to
// the Client's turnstile.WithQueuePosition function when it changes.
//
// Every waiting caller queues. To retry first and queue only when a key
// is contended, give the Fair view to a Client on the plain lock:
// turnstile.New(b, turnstile.WithQueueWhenBusy(fair, 0)).
type Fair struct {
	b       *Backend
	timeout time.Duration
	poll    time.Duration
}

var (
	_ driver.Backend       = (*Fair)(nil)
	_ driver.Queuer        = (*Fair)(nil)
	_ driver.BatchExtender = (*Fair)(nil)
	_ driver.Notifier      = (*Fair)(nil)
	_ driver.Namer         = (*Fair)(nil)
)

// Name implements driver.Namer.
func (f *Fair) Name() string { return f.b.Name() + " fair" }

// Released implements driver.Notifier, with the plain lock's notices.
func (f *Fair) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return f.b.Released(ctx, key)
}

// queueKeys are the queue, heartbeat and counter keys of key.
func (f *Fair) queueKeys(n names) []string {
	return []string{n.kindKey(rediskeys.Queue), n.kindKey(rediskeys.QueueAlive), n.kindKey(rediskeys.QueueSeq)}
}

// attempt runs the fair acquire script; join selects waiting (see
// fair_acquire.lua).
func (f *Fair) attempt(ctx context.Context, key, owner string, ttl time.Duration, join bool) (int64, error) {
	n := f.b.names(key)
	lockTTL, fenceTTL := f.b.ttlArgs(ttl)
	mode := "0"
	if join {
		mode = "1"
	}
	c := call{
		keys: append([]string{n.lock, n.fence}, f.queueKeys(n)...),
		args: []string{owner, lockTTL, fenceTTL, millis(f.timeout), mode},
	}
	return f.b.runGrant(ctx, fairAcquire, c, func(context.Context) { f.leave(key, owner, true) })
}

// Acquire implements driver.Backend: it takes the lock only if it is
// free and nobody waits for it (or owner is the first waiter).
func (f *Fair) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return 0, false, err
	}
	return leaseOf(f.attempt(ctx, key, owner, ttl, false))
}

// AcquireWait implements driver.Queuer: owner joins key's queue and waits
// until it is first and the lock is free, then takes it. Meanwhile it
// renews its place every third of the waiter timeout and reports its
// place to driver.PositionFunc(ctx) whenever it learns a new one. When
// ctx is done it leaves the queue (releasing the lock if it was granted
// meanwhile) and returns ctx.Err().
func (f *Fair) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return 0, err
	}
	// Subscribe before joining, so that no release after the first
	// attempt goes unseen. Without notices the waiter polls.
	var notices <-chan struct{}
	if ch, stop, err := f.b.Released(ctx, key); err == nil {
		notices = ch
		defer stop()
	}
	return f.queue(ctx, key, owner, ttl, notices)
}

// queue is AcquireWait's wait in the queue.
func (f *Fair) queue(ctx context.Context, key, owner string, ttl time.Duration, notices <-chan struct{}) (uint64, error) {
	report := driver.PositionFunc(ctx)
	beat := max(f.timeout/3, time.Millisecond)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	reported := 0
	for {
		n, err := f.attempt(ctx, key, owner, ttl, true)
		if err != nil {
			// The outcome is unknown: the script may have queued the
			// owner, or granted it the lock.
			f.leave(key, owner, true)
			if cerr := ctx.Err(); cerr != nil {
				return 0, errors.Join(cerr, err)
			}
			return 0, err
		}
		if n > 0 {
			return uint64(n), nil
		}
		place := int(-n)
		if report != nil && place != reported {
			report(place)
			reported = place
		}
		// ahead estimates how many are still in front: each release lets
		// at most one in. Only waiters near the front look again on a
		// notice, so a release does not wake the whole queue.
		// The first two poll as well, so that a lost notice, or a lock
		// that expired unreleased, delays the line by a poll interval at
		// most, not by a heartbeat.
		ahead := place - 1
		due := time.Now().Add(beat)
		if ahead <= 1 {
			due = time.Now().Add(min(beat, f.poll))
		}
		for woken := false; !woken; {
			timer.Reset(time.Until(due))
			select {
			case <-ctx.Done():
				f.leave(key, owner, false)
				return 0, ctx.Err()
			case <-timer.C:
				woken = true
			case <-notices:
				timer.Stop()
				ahead = max(ahead-1, 0)
				woken = ahead <= 1
			}
		}
	}
}

// leave takes owner out of key's queue, and with release also frees the
// lock in case owner was granted it. It runs detached from the caller's
// context, which may be done.
func (f *Fair) leave(key, owner string, release bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n := f.b.names(key)
	_, _ = f.b.run(ctx, fairLeave, call{keys: f.queueKeys(n), args: []string{owner, n.channel}})
	if release {
		_, _ = f.b.Release(ctx, key, owner)
	}
}

// Position returns owner's place in key's queue: 1 is next to take the
// lock, 0 means owner does not wait for key.
func (f *Fair) Position(ctx context.Context, key, owner string) (int, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return 0, err
	}
	q := f.queueKeys(f.b.names(key))
	n, err := f.b.run(ctx, fairPosition, call{keys: q[:2], args: []string{owner}})
	return int(n), err
}

// Extend implements driver.Backend: the lock is the plain lock.
func (f *Fair) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return false, err
	}
	return f.b.Extend(ctx, key, owner, ttl)
}

// ExtendMany implements driver.BatchExtender, as the plain lock does.
func (f *Fair) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return f.b.ExtendMany(ctx, reqs)
}

// Release implements driver.Backend: the lock is the plain lock, whose
// release tells the next waiter (always: the queue's waiters do not mark
// the lock as the plain lock's do).
func (f *Fair) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return false, err
	}
	ok, _, err := f.b.release(ctx, key, owner, "always")
	return ok, err
}
