package redlock_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

var errDown = errors.New("fake: node down")

// flaky is a memory node with faults injected through the driver
// interfaces, as a network and a server would cause them. It does not
// batch renewals, so the composite's one-by-one fallback runs on it.
type flaky struct {
	mem  *memory.Backend
	name string

	mu        sync.Mutex
	down      bool          // every call fails at once
	delay     time.Duration // every call waits this long first
	deaf      bool          // the wait ignores the call's context (a hung connection)
	lostReply bool          // calls take effect, but the caller gets an error
	onAcquire func()        // runs inside Acquire, before it takes effect
}

func newFlaky(name string) *flaky { return &flaky{mem: memory.New(), name: name} }

// set changes the faults under the node's lock.
func (f *flaky) set(change func(*flaky)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *flaky) Name() string { return f.name }

// before applies the faults common to every call; a non-nil error means
// the call does not reach the store.
func (f *flaky) before(ctx context.Context) (lostReply bool, err error) {
	f.mu.Lock()
	down, delay, deaf, lost := f.down, f.delay, f.deaf, f.lostReply
	f.mu.Unlock()
	if down {
		return false, errDown
	}
	if delay > 0 {
		if deaf {
			time.Sleep(delay)
		} else {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
	}
	return lost, nil
}

func (f *flaky) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	lost, err := f.before(ctx)
	if err != nil {
		return 0, false, err
	}
	f.mu.Lock()
	hook := f.onAcquire
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	tok, ok, err := f.mem.Acquire(context.WithoutCancel(ctx), key, owner, ttl)
	if lost {
		return 0, false, errors.New("fake: reply lost")
	}
	return tok, ok, err
}

func (f *flaky) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	lost, err := f.before(ctx)
	if err != nil {
		return false, err
	}
	ok, err := f.mem.Extend(context.WithoutCancel(ctx), key, owner, ttl)
	if lost {
		return false, errors.New("fake: reply lost")
	}
	return ok, err
}

func (f *flaky) Release(ctx context.Context, key, owner string) (bool, error) {
	lost, err := f.before(ctx)
	if err != nil {
		return false, err
	}
	ok, err := f.mem.Release(context.WithoutCancel(ctx), key, owner)
	if lost {
		return false, errors.New("fake: reply lost")
	}
	return ok, err
}

func (f *flaky) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	lost, err := f.before(ctx)
	if err != nil {
		return false, err
	}
	ok, err := f.mem.RaiseFence(context.WithoutCancel(ctx), key, owner, token)
	if lost {
		return false, errors.New("fake: reply lost")
	}
	return ok, err
}

var (
	_ driver.Backend = (*flaky)(nil)
	_ driver.Fencer  = (*flaky)(nil)
)

// unfenced is a node that cannot raise tokens.
type unfenced struct{ driver.Backend }

// quarantined is a node that reports a restart quarantine.
type quarantined struct {
	*memory.Backend
	q time.Duration
}

func (q quarantined) RestartQuarantine() time.Duration { return q.q }
