package turnstile_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// TestWatchdogBatchesRenewals: leases acquired together are renewed
// together, through ExtendMany, not one round trip each.
func TestWatchdogBatchesRenewals(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := newClient(t, f, turnstile.WithTTL(300*time.Millisecond))
	const n = 200
	leases := make([]*turnstile.Lease, n)
	for i := range leases {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	time.Sleep(350 * time.Millisecond) // past the first TTL: every lease renewed at least once
	for i, l := range leases {
		if l.Context().Err() != nil {
			t.Fatalf("lease %d lost: %v", i, context.Cause(l.Context()))
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	extends, batches := f.extends.Load(), f.batches.Load()
	if extends < n {
		t.Fatalf("%d renewals for %d leases past their first renewal time", extends, n)
	}
	if batches == 0 || int(batches)*4 > int(extends) {
		t.Fatalf("%d renewals went out in %d batches; want batches of many", extends, batches)
	}
}

// TestWatchdogWithoutBatchCapability renews through plain Extend calls.
func TestWatchdogWithoutBatchCapability(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := newClient(t, plain{f}, turnstile.WithTTL(200*time.Millisecond))
	var leases []*turnstile.Lease
	for i := range 20 {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	time.Sleep(400 * time.Millisecond)
	for _, l := range leases {
		if l.Context().Err() != nil {
			t.Fatalf("lease lost: %v", context.Cause(l.Context()))
		}
		_ = l.Release(ctx)
	}
	if f.batches.Load() != 0 || f.extends.Load() < 40 {
		t.Fatalf("batches %d, extends %d", f.batches.Load(), f.extends.Load())
	}
}

// waitLost waits up to d for l to be lost, and fails t with msg if it is
// not.
func waitLost(t *testing.T, l *turnstile.Lease, d time.Duration, msg string) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(d):
		t.Fatal(msg)
	}
}

// TestLostWhenStoreNeverAnswers: renewals hang (the store is partitioned
// away and the call ignores its context); the lease must still end at its
// local deadline, before the store could have expired it.
func TestLostWhenStoreNeverAnswers(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	unblock := make(chan struct{})
	var hang atomic.Bool
	f.extendHook = func(context.Context) {
		if hang.Load() {
			<-unblock // ignores ctx on purpose
		}
	}
	ttl := 300 * time.Millisecond
	c := newClient(t, plain{f}, turnstile.WithTTL(ttl))
	t.Cleanup(func() { close(unblock) }) // runs before the Client's Close, which waits for the hung call
	hang.Store(true)
	start := time.Now()
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, 5*time.Second, "lease never declared lost while the store hung")
	// Lost at its local deadline (ttl minus drift), while the renewal
	// still hangs: not when the store answers, nor a renewal period
	// later. A descheduled test goroutine sees it late, so the bound is
	// the ttl plus half of it, which a loss decided by anything but the
	// deadline exceeds.
	if lived := time.Since(start); lived > ttl*3/2 {
		t.Fatalf("lease context lived %v, longer than the ttl %v and half of it", lived, ttl)
	}
	if v := l.Validity(); v != 0 {
		t.Fatalf("lease lost with %v of validity left", v)
	}
	if !errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
		t.Fatalf("cause = %v", context.Cause(l.Context()))
	}
}

// TestTransientRenewalErrorsAreRetried: two failed renewals in a row do
// not lose a lease whose deadline has not passed.
func TestTransientRenewalErrorsAreRetried(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := newClient(t, f, turnstile.WithTTL(600*time.Millisecond))
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	f.extendFails.Store(2)
	time.Sleep(900 * time.Millisecond)
	if l.Context().Err() != nil {
		t.Fatalf("lease lost after transient errors: %v", context.Cause(l.Context()))
	}
	if f.extendFails.Load() >= 0 {
		t.Fatal("the injected failures were never hit")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPersistentRenewalErrorsLoseTheLease: when every renewal fails, the
// lease ends at its deadline with a cause naming the error.
func TestPersistentRenewalErrorsLoseTheLease(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	f.extendFails.Store(1 << 30)
	ttl := 300 * time.Millisecond
	c := newClient(t, f, turnstile.WithTTL(ttl))
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, 5*time.Second, "lease not lost")
	cause := context.Cause(l.Context())
	if !errors.Is(cause, turnstile.ErrLockLost) || !errors.Is(cause, errFlaky) {
		t.Fatalf("cause = %v, want ErrLockLost wrapping the renewal error", cause)
	}
}

// TestLostReplyIsCleanedUp: the store took the lock but the reply was
// lost; the Client must free it rather than leave it until its TTL.
func TestLostReplyIsCleanedUp(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	var fail atomic.Bool
	fail.Store(true)
	f.acquireErr = func() error {
		if fail.Load() {
			return errFlaky
		}
		return nil
	}
	c := newClient(t, f, turnstile.WithTTL(time.Minute))
	if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, errFlaky) {
		t.Fatalf("TryAcquire = %v, want the store error", err)
	}
	fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, _, held := f.Holder("k"); !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lock taken by a lost reply was never released")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestExtendChangesRenewal: after Extend with a new TTL the watchdog
// keeps renewing with it.
func TestExtendChangesRenewal(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := newClient(t, f, turnstile.WithTTL(2*time.Second))
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	before := f.extends.Load()
	time.Sleep(500 * time.Millisecond)
	if l.Context().Err() != nil {
		t.Fatalf("lease lost: %v", context.Cause(l.Context()))
	}
	if got := f.extends.Load() - before; got < 4 {
		t.Fatalf("%d renewals in 500ms with a 200ms ttl; the watchdog kept the old period", got)
	}
	if v := l.Validity(); v > 200*time.Millisecond {
		t.Fatalf("validity %v above the new ttl", v)
	}
	_ = l.Release(ctx)
}

// TestRetryAfterLostReplyIsNotReleasedBehindItsBack: after a failed
// attempt the client releases that attempt's owner in the background; a
// later attempt that succeeds must not be freed by that release.
func TestRetryAfterLostReplyIsNotReleasedBehindItsBack(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	var calls atomic.Int32
	gate := make(chan struct{})
	f.releaseGate = gate // the background release arrives late, after the second attempt
	f.acquireErr = func() error {
		switch calls.Add(1) {
		case 1:
			return errFlaky // first attempt: the lock was taken but the reply lost
		case 2:
			close(gate)
		}
		return nil
	}
	c := newClient(t, f, turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxRetries: 50}))
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for f.releases.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	owner, _, _, held := f.Holder("k")
	if !held || owner != l.Owner() {
		t.Fatalf("after the retry the store holds %q (held %v), want the lease's owner %q", owner, held, l.Owner())
	}
	_ = l.Release(ctx)
}

// TestWatchdogSleepsThroughShortLeases: leases taken and released one
// after another, each due for renewal later than the scheduler's next
// look, never wake the scheduler: it looks at its leases once per renewal
// period at most, not once per lock.
//
// The scheduler is first seen asleep on its timer (its next look a
// renewal period away); from then on, however the goroutines are
// scheduled, a correct scheduler makes no look at all during the loop,
// while one woken per lock looks once per lock (the loop yields after
// each release so that a woken scheduler runs).
func TestWatchdogSleepsThroughShortLeases(t *testing.T) {
	const ttl = 3 * time.Minute // next look a minute away: far beyond the loop
	c := newClient(t, memory.New(), turnstile.WithTTL(ttl))
	ctx := context.Background()
	first, err := c.TryAcquire(ctx, "short:first")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !c.WatchdogAsleep(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog scheduler never went to sleep on its timer while a lease was held")
		}
	}
	before := c.WatchdogScans()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	start := time.Now()
	for i := range n {
		l, err := c.TryAcquire(ctx, "short:"+strconv.Itoa(i%7))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	if took := time.Since(start); took > ttl/3 {
		t.Fatalf("%d locks took %v, longer than a renewal period: the scheduler's timer may have fired", n, took)
	}
	if scans := c.WatchdogScans() - before; scans != 0 {
		t.Errorf("the watchdog looked at its leases %d times while %d short leases were taken and released, want none (its next look is a renewal period away)", scans, n)
	}
}
