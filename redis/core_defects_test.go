package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
)

// TestDefectForceReleaseLetsHandedLeaseWrite: ForceRelease raises
// fence.Redis's guard so that the lease it removes cannot write late,
// also a lease the Client handed over twice without the store (token
// T+2, the lock held in Redis under token T's owner id).
func TestDefectForceReleaseLetsHandedLeaseWrite(t *testing.T) {
	srv, ctx := startRedis(t)
	c := newClient(t, dial(t, srv), turnstile.WithTTL(8*time.Second),
		turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxRetries: -1}))
	other := newClient(t, dial(t, srv))
	guard, err := fence.NewRedis(rueidisClient(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	const key = "k"
	data := fence.DataKey(key, "data")

	x, err := other.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	w1, w2, w3 := waitInLine(t, ctx, c, key), waitInLine(t, ctx, c, key), waitInLine(t, ctx, c, key)
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// w1 takes the lock from the store and writes; w2, promoted behind
	// it, is ready for its release at once, and w3 for w2's.
	l1 := mustLease(t, <-w1)
	if err := guard.Set(ctx, key, l1.Token(), data, "first"); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := mustLease(t, <-w2)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l3 := mustLease(t, <-w3)
	st, err := c.ForceRelease(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// l3, paused before its first write, writes now.
	err = guard.Set(ctx, key, l3.Token(), data, "late")
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("ForceRelease removed the lease with token %d (after %d, %d: handed over without the store) and returned the floor %d, yet fence.Redis took that lease's late write: %v",
			l3.Token(), l1.Token(), l2.Token(), st.Token, err)
	}
}

type result struct {
	l   *turnstile.Lease
	err error
}

// waitInLine starts c.Acquire(key) and returns once the call waits in
// c's line for the key (its EventWaiting).
func waitInLine(t *testing.T, ctx context.Context, c *turnstile.Client, key string) <-chan result {
	t.Helper()
	waiting := make(chan struct{}, 1)
	obs := turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
		if e.Type == turnstile.EventWaiting {
			waiting <- struct{}{}
		}
	}))
	out := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, key, obs)
		out <- result{l, err}
	}()
	select {
	case <-waiting:
	case r := <-out:
		t.Fatalf("Acquire(%s) did not wait: %v %v", key, r.l, r.err)
	}
	return out
}

func mustLease(t *testing.T, r result) *turnstile.Lease {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.l
}
