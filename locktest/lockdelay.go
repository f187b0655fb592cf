package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Lock delay (turnstile.WithLockDelay): a holder that fails leaves its
// lock taken for the delay past its TTL; one that releases frees it at
// once. Stores that cannot keep it (no driver.TTLHolder) must be refused.

// delayMargin is how much earlier than TTL + delay, by this process's
// clock, a store may free a failed holder's lock: the stores count
// expiries in whole milliseconds and may truncate the grant time (Redis's
// PX, MySQL's millisecond timestamps): 1 ms, twice over; and their clock
// and this process's may run at rates that differ by up to NTP's largest
// slew, 500 ppm: a thousandth of the hold covers it.
func delayMargin(hold time.Duration) time.Duration {
	return 2*time.Millisecond + hold/1000
}

// delayFor is the lock delay the cases use with lease TTL ttl: long
// enough that a store ignoring it (freeing the lock after the TTL, or
// after a whole-second rounding of it, as etcd leases count) is caught.
func delayFor(ttl time.Duration) time.Duration {
	return max(2*ttl, time.Second)
}

func testLockDelay(t *testing.T, h *Harness) {
	b := h.backend(t)
	if !driver.HoldsTTL(b) {
		_, err := turnstile.New(b, turnstile.WithLockDelay(time.Second))
		if !errors.Is(err, turnstile.ErrInvalidOption) || !errors.Is(err, turnstile.ErrUnsupported) {
			t.Fatalf("New with a lock delay on %s, which cannot keep one: %v, want ErrInvalidOption and ErrUnsupported", driver.Name(b), err)
		}
		c := h.client(t)
		_, err = c.TryAcquire(ctxFor(t, time.Minute), key(t), turnstile.WithLockDelay(time.Second))
		if !errors.Is(err, turnstile.ErrInvalidOption) || !errors.Is(err, turnstile.ErrUnsupported) {
			t.Fatalf("TryAcquire with a lock delay on %s: %v, want ErrInvalidOption and ErrUnsupported", driver.Name(b), err)
		}
		return
	}
	t.Run("FailedHolder", func(t *testing.T) { testDelayFailedHolder(t, h) })
	t.Run("RenewalsCarryIt", func(t *testing.T) { testDelayRenewals(t, h) })
	t.Run("CleanReleaseFreesAtOnce", func(t *testing.T) { testDelayCleanRelease(t, h) })
	t.Run("LostLeaseNotReleased", func(t *testing.T) { testDelayLostRelease(t, h) })
}

// awaitFree polls key with c until it is granted, and returns when (by
// the caller's clock) and the lease.
func awaitFree(t *testing.T, c *turnstile.Client, k string, limit time.Duration) (time.Time, *turnstile.Lease) {
	t.Helper()
	ctx := ctxFor(t, limit+time.Minute)
	start := time.Now()
	for {
		l, err := c.TryAcquire(ctx, k)
		if err == nil {
			return time.Now(), l
		}
		if !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("TryAcquire: %v", err)
		}
		if time.Since(start) > limit {
			t.Fatalf("lock still held %v after the wait began", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testDelayFailedHolder: a holder that takes the lock with a lock delay
// for one call, without a watchdog, and dies (its Client closed, nothing
// released): the next grant comes no sooner than TTL + delay after the
// holder's request was sent.
func testDelayFailedHolder(t *testing.T, h *Harness) {
	ttl := h.ttl()
	d := delayFor(ttl)
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	a, b := h.client(t), h.client(t)
	sent := time.Now()
	la, err := a.TryAcquire(ctx, k, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog(), turnstile.WithLockDelay(d))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if v := la.Validity(); v > ttl {
		t.Fatalf("Validity %v is more than the TTL %v: the lease must count the TTL alone", v, ttl)
	}
	_ = a.Close() // dies: nothing released
	got, lb := awaitFree(t, b, k, ttl+d+30*time.Second)
	defer lb.Release(ctx)
	if waited := got.Sub(sent); waited < ttl+d-delayMargin(ttl+d) {
		t.Fatalf("the lock of a failed holder was granted again %v after its grant was sent, before TTL %v + lock delay %v", waited, ttl, d)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token after the delay %d is not greater than the failed holder's %d", lb.Token(), la.Token())
	}
}

// testDelayRenewals: the watchdog's renewals ask for TTL + delay too: a
// holder renewed several times that dies leaves its lock for the delay
// after its last renewal, which was sent within a TTL before it died.
func testDelayRenewals(t *testing.T, h *Harness) {
	ttl := h.ttl()
	d := delayFor(ttl)
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	a := h.client(t, turnstile.WithTTL(ttl), turnstile.WithLockDelay(d))
	b := h.client(t)
	la, err := a.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	time.Sleep(2 * ttl) // renewed meanwhile (at TTL/3), and the first hold is past
	before := time.Now()
	if la.Validity() == 0 {
		// As in WatchdogKeepsLeaseAlive: the watchdog must keep it.
		t.Fatalf("the watchdog lost the lease: %v", context.Cause(la.Context()))
	}
	_ = a.Close()
	// The last confirmed renewal was sent after before − TTL (the lease
	// was still valid at before), so the store holds the lock until
	// after before + delay.
	got, lb := awaitFree(t, b, k, ttl+d+30*time.Second)
	defer lb.Release(ctx)
	if waited := got.Sub(before); waited < d-delayMargin(ttl+d) {
		t.Fatalf("granted again %v after the renewed holder died, before the lock delay %v: renewals did not carry it", waited, d)
	}
}

// testDelayCleanRelease: a holder with a lock delay that releases frees
// the lock at once.
func testDelayCleanRelease(t *testing.T, h *Harness) {
	ttl := h.ttl()
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	a := h.client(t, turnstile.WithTTL(ttl), turnstile.WithLockDelay(delayFor(ttl)))
	b := h.client(t)
	l, err := a.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	lb, err := b.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("TryAcquire right after a clean release with a lock delay: %v", err)
	}
	_ = lb.Release(ctx)
}

// testDelayLostRelease: Release of a lease that was lost (its local
// deadline passed) leaves the lock to the store for the delay, with
// ErrNotHeld: freeing it would cut the delay short.
func testDelayLostRelease(t *testing.T, h *Harness) {
	ttl := h.ttl()
	d := delayFor(ttl)
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	a := h.client(t, turnstile.WithTTL(ttl), turnstile.WithLockDelay(d), turnstile.WithoutWatchdog())
	b := h.client(t)
	sent := time.Now()
	l, err := a.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	<-l.Context().Done()
	if !errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
		t.Fatalf("lease ended with %v, want ErrLockLost", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Fatalf("Release of a lost lease with a lock delay = %v, want ErrNotHeld", err)
	}
	lb, err := b.TryAcquire(ctx, k)
	tried := time.Since(sent)
	if err == nil {
		_ = lb.Release(ctx)
		if tried < ttl+d-delayMargin(ttl+d) {
			t.Fatalf("the lock was free %v after its grant was sent, before TTL %v + lock delay %v: Release freed a lost lease's lock", tried, ttl, d)
		}
		return // this host stalled past the whole delay: nothing to tell
	}
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("TryAcquire: %v", err)
	}
}
