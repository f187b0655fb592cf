package turnstile_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// One small test per way a lease handed to the next waiter of the same
// Client without the store (driver.TokenRoom: the lock stays held there
// under the old owner id, the new lease carries the token plus one) can
// break exclusion or fencing, and per way a waiter or an observer can be
// left waiting. Each builds its case with the public API over roomStore
// (roomstore_test.go); where a waiter must be ready to take a handoff
// when a lease is released, the waiter is either promoted behind a
// waiter that won the lock (ready at once) or given time to settle
// after its failed attempt, and the handoff is checked to have happened
// (the token one above the releasing lease's) where the test depends on
// it. None asserts the handoff itself: each states what must hold
// however the lock reaches the next holder.

// fast retries every few milliseconds for as long as the context lasts.
var fast = turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxRetries: -1})

// settled retries rarely: a waiter spends nearly all of its time ready
// for a handoff.
var settled = turnstile.WithBackoff(turnstile.Constant{Interval: 500 * time.Millisecond, MaxRetries: -1})

type acquired struct {
	l   *turnstile.Lease
	err error
}

// inLine starts c.Acquire(key) and returns once the call waits in c's
// line for the key (its EventWaiting).
func inLine(t *testing.T, ctx context.Context, c *turnstile.Client, key string, opts ...turnstile.Option) <-chan acquired {
	t.Helper()
	waiting := make(chan struct{}, 1)
	obs := turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
		if e.Type == turnstile.EventWaiting {
			waiting <- struct{}{}
		}
	}))
	out := make(chan acquired, 1)
	go func() {
		l, err := c.Acquire(ctx, key, append(opts, obs)...)
		out <- acquired{l, err}
	}()
	select {
	case <-waiting:
	case r := <-out:
		t.Fatalf("Acquire(%s) did not wait: lease %v, err %v", key, r.l, r.err)
	case <-ctx.Done():
		t.Fatalf("Acquire(%s) never waited", key)
	}
	return out
}

// settle gives a waiter whose attempt failed the moment it needs to be
// ready for a handoff (it then waits on its timer for 500 ms).
func settle(t *testing.T, s *roomStore, failedBefore int) {
	t.Helper()
	for i := 0; s.failedAny() <= failedBefore; i++ {
		if i > 5000 {
			t.Fatal("the waiter never tried the store")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}

func lease(t *testing.T, r acquired) *turnstile.Lease {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestDefectForceReleaseFloorBelowHandedToken: ForceRelease must shut out
// the lease it removes, also one handed over twice without the store
// (token T+2): fenced storage given the returned floor refuses tokens
// up to it, so the floor must be at least the removed lease's token, and
// the EventForceReleased must not report less.
func TestDefectForceReleaseFloorBelowHandedToken(t *testing.T) {
	ctx := testCtx(t)
	s := newRoomStore()
	var reported atomic.Uint64
	c := newClient(t, s, turnstile.WithTTL(8*time.Second), fast,
		turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
			if e.Type == turnstile.EventForceReleased {
				reported.Store(e.Token)
			}
		})))
	other := newClient(t, s)
	const key = "k"
	x, err := other.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	w1, w2, w3 := inLine(t, ctx, c, key), inLine(t, ctx, c, key), inLine(t, ctx, c, key)
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// w1 takes the lock from the store; w2, promoted behind it, is ready
	// for its release at once, and w3 for w2's.
	l1 := lease(t, <-w1)
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := lease(t, <-w2)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l3 := lease(t, <-w3)
	st, err := c.ForceRelease(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Token < l3.Token() {
		t.Fatalf("ForceRelease removed the lease with token %d (handed over without the store after %d) but returned the fence floor %d: fenced storage raised to the floor still accepts that lease's late writes", l3.Token(), l1.Token(), st.Token)
	}
	if got := reported.Load(); got < l3.Token() {
		t.Fatalf("EventForceReleased reported token %d for the removed lease with token %d", got, l3.Token())
	}
}

// TestDefectWithOwnerHandedToAnotherWaiter: a lease taken WithOwner,
// released while an unrelated waiter of the same Client waits, must not
// leave that waiter holding the lock under the fixed owner id: the
// owner's next TryAcquire would find the lock "held by us" and be
// granted it too.
func TestDefectWithOwnerHandedToAnotherWaiter(t *testing.T) {
	ctx := testCtx(t)
	s := newRoomStore()
	c := newClient(t, s, turnstile.WithTTL(8*time.Second), settled)
	const owner, key = "worker-7", "k"
	a, err := c.TryAcquire(ctx, key, turnstile.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	failed := s.failedAny()
	w := inLine(t, ctx, c, key)
	settle(t, s, failed)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := lease(t, <-w)
	defer b.Release(ctx)
	again, err := c.TryAcquire(ctx, key, turnstile.WithOwner(owner))
	if err == nil {
		t.Fatalf("two holders: %s's lease (token %d) was released while another waiter waited, which now holds the lock as %s with token %d (valid %v); %s's next TryAcquire was granted token %d",
			owner, a.Token(), b.Owner(), b.Token(), b.Validity(), owner, again.Token())
	}
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatal(err)
	}
}

// TestDefectReleaseRetryAfterLostReply: Release reaches the store and
// frees the lock, but its reply is lost; another Client takes the lock;
// the documented retry of Release must not hand the lock it no longer
// holds to a waiter of its Client.
func TestDefectReleaseRetryAfterLostReply(t *testing.T) {
	ctx := testCtx(t)
	s := newRoomStore()
	c := newClient(t, s, turnstile.WithTTL(8*time.Second), settled)
	other := newClient(t, s)
	const key = "k"
	l1, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	s.loseRelease.Store(true)
	if err := l1.Release(ctx); err == nil {
		t.Fatal("setup: the release whose reply was lost returned nil")
	}
	x, err := other.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("setup: the store kept the lock after the release: %v", err)
	}
	failed := s.failedAny()
	w := inLine(t, ctx, c, key)
	settle(t, s, failed)
	retryErr := l1.Release(ctx)
	xValid := x.Validity()
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lw := lease(t, <-w)
	defer lw.Release(ctx)
	if lw.Token() <= x.Token() {
		t.Fatalf("two holders: the retried Release returned %v and handed the lock to a waiter with token %d while another Client's lease with token %d held it (valid %v)",
			retryErr, lw.Token(), x.Token(), xValid)
	}
}

// TestDefectDoubleReleaseDeletesSuccessorsLock: two Release calls of one
// lease at once must not both act: one hands the lock to the next waiter
// without the store, and the other must not then release, in the store,
// the owner id the successor holds the lock under.
func TestDefectDoubleReleaseDeletesSuccessorsLock(t *testing.T) {
	ctx := testCtx(t)
	s := newRoomStore()
	s.releaseGate, s.releasing = make(chan struct{}), make(chan struct{}, 4)
	c := newClient(t, s, turnstile.WithTTL(8*time.Second), settled)
	other := newClient(t, s)
	const key = "k"
	l1, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- l1.Release(ctx) }()
	<-s.releasing // the first Release is on its way to the store
	failed := s.failedAny()
	w := inLine(t, ctx, c, key)
	settle(t, s, failed)
	second := make(chan error, 1)
	go func() { second <- l1.Release(ctx) }()
	var secondErr error
	select {
	case secondErr = <-second:
	case <-s.releasing: // went to the store too
	case <-time.After(2 * time.Second): // waits for the first
	}
	close(s.releaseGate)
	firstErr := <-first
	lw := lease(t, <-w)
	defer lw.Release(ctx)
	x, err := other.TryAcquire(ctx, key)
	if err == nil {
		t.Fatalf("two holders: Release and Release at once returned %v and %v; the waiter holds a lease with token %d (after %d, valid %v) and another Client was granted token %d",
			firstErr, secondErr, lw.Token(), l1.Token(), lw.Validity(), x.Token())
	}
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatal(err)
	}
}

// TestDefectExtendInFlightDuringHandoff: an Extend on its way to the
// store when its lease is released must not shorten the lock of the
// next holder: the Release waits for the Extend (one operation at a time
// on an owner id), and the lock then reaches the next waiter with the
// TTL the store has, through the store if the Extend changed it.
func TestDefectExtendInFlightDuringHandoff(t *testing.T) {
	ctx := testCtx(t)
	s := newRoomStore()
	s.extendGate, s.extending = make(chan struct{}), make(chan struct{}, 4)
	// No watchdog: the test's Extend is the only one.
	c := newClient(t, s, turnstile.WithTTL(5*time.Second), turnstile.WithoutWatchdog(), settled)
	other := newClient(t, s)
	const key = "k"
	l1, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	failed := s.failedAny()
	w := inLine(t, ctx, c, key)
	settle(t, s, failed)
	const short = 300 * time.Millisecond
	extended := make(chan error, 1)
	go func() { extended <- l1.Extend(ctx, short) }()
	<-s.extending
	released := make(chan error, 1)
	go func() { released <- l1.Release(ctx) }()
	select {
	case err := <-released:
		t.Fatalf("Release returned %v while the lease's Extend was on its way to the store", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(s.extendGate)
	extendErr := <-extended
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	lw := lease(t, <-w)
	defer lw.Release(ctx)
	time.Sleep(2 * short) // past the shortened lock's expiry in the store
	x, err := other.TryAcquire(ctx, key)
	if err == nil && lw.Validity() > 0 {
		t.Fatalf("two holders: Extend(%v) returned %v; the successor (token %d) is valid for %v more, yet another Client was granted token %d",
			short, extendErr, lw.Token(), lw.Validity(), x.Token())
	}
}
