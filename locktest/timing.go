package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// testAcquireHonoursCancel: a waiter sleeping in a long backoff returns
// within 50 ms of its context being cancelled, with an error matching
// context.Canceled; a deadline gives context.DeadlineExceeded.
func testAcquireHonoursCancel(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	holder := h.client(t)
	l, err := holder.TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	slow := turnstile.WithBackoff(turnstile.Exponential{Base: 2 * time.Second, Cap: 10 * time.Second, MaxRetries: -1})
	waiter := h.client(t, slow)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(wctx, k)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		// Far under the 2 s backoff the waiter sleeps in: a waiter that
		// ignored its context would return a round later. A loaded
		// machine has taken over 100 ms to run a cancelled waiter.
		if took := time.Since(cancelled); took > 500*time.Millisecond {
			t.Errorf("Acquire returned %v after cancellation, want within 500ms (a quarter of its 2s backoff)", took)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return after its context was cancelled")
	}

	dctx, dcancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer dcancel()
	if _, err := waiter.Acquire(dctx, k); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

// testTryAcquireFailsFast: one attempt, ErrNotAcquired, and Acquire gives
// up with ErrNotAcquired once its retries are used up.
func testTryAcquireFailsFast(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	l, err := h.client(t).TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	other := h.client(t)
	if _, err := other.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key = %v, want ErrNotAcquired", err)
	}
	few := turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 2 * time.Millisecond, MaxRetries: 3})
	if _, err := other.Acquire(ctx, k, few); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("Acquire after its retries = %v, want ErrNotAcquired", err)
	}
}

// testWatchdogKeepsAlive holds a lease for 5 TTLs without calling Extend.
func testWatchdogKeepsAlive(t *testing.T, h *Harness) {
	ttl := h.ttl()
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	c := h.client(t, turnstile.WithTTL(ttl))
	l, err := c.TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	other := h.client(t)
	end := time.Now().Add(5 * ttl)
	for time.Now().Before(end) {
		if l.Context().Err() != nil {
			t.Fatalf("lease ended after %v: %v", time.Since(end.Add(-5*ttl)), context.Cause(l.Context()))
		}
		if _, err := other.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("another client got a lock the watchdog should keep: %v", err)
		}
		time.Sleep(ttl / 4)
	}
	if v := l.Validity(); v <= 0 || v > ttl {
		t.Fatalf("validity %v outside (0, %v]", v, ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after 5 TTLs: %v", err)
	}
	if !errors.Is(context.Cause(l.Context()), turnstile.ErrReleased) {
		t.Fatalf("cause after release = %v, want ErrReleased", context.Cause(l.Context()))
	}
}

// testLostBehindItsBack: the key disappears from the store while held;
// the holder's context is cancelled with ErrLockLost within one renewal
// period.
func testLostBehindItsBack(t *testing.T, h *Harness) {
	if h.Evict == nil {
		t.Fatal("locktest: Harness.Evict is nil; the suite needs it to remove a lock behind its holder's back")
	}
	// At least 3 s: the renewal that finds the key gone comes a third of
	// the TTL after the last, the local deadline a whole TTL after it, and
	// a busy machine (an Evict that runs a client process, a renewal
	// descheduled) must not close that gap of two thirds.
	ttl := max(2*h.ttl(), 3*time.Second)
	renew := ttl / 3
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	l, err := h.client(t, turnstile.WithTTL(ttl)).TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	h.Evict(t, k)
	evicted := time.Now()
	select {
	case <-l.Context().Done():
		if !errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
			t.Fatalf("cause = %v, want ErrLockLost", context.Cause(l.Context()))
		}
		// Told by the renewal that the store refused, not by the local
		// deadline: that is the point, whatever the scheduler's delays.
		if cause := context.Cause(l.Context()); strings.Contains(cause.Error(), "local deadline") {
			t.Fatalf("the holder learned of the loss from its own deadline (%v), not from a refused renewal within one renewal period (%v)", cause, renew)
		}
		// A generous bound: a busy machine delays the renewal and this
		// goroutine, but not by a whole TTL.
		if took := time.Since(evicted); took > renew+ttl {
			t.Fatalf("loss noticed after %v, want within one renewal period (%v)", took, renew)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("holder was never told its lock was removed")
	}
	if err := l.Release(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Fatalf("Release of a lost lease = %v, want ErrNotHeld", err)
	}
}

// testExpiryWithoutWatchdog: with no watchdog the lease ends locally
// before the store expires it, and not much earlier.
func testExpiryWithoutWatchdog(t *testing.T, h *Harness) {
	// At least 2 s: TryAcquire refuses a lease whose acquisition took
	// longer than its TTL, and on a loaded machine a cluster round trip
	// has taken longer than 600 ms.
	ttl := max(2*h.ttl(), 2*time.Second)
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	c := h.client(t)
	start := time.Now()
	l, err := c.TryAcquire(ctx, k, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	// The lease's own deadline, read before it passed: no scheduling
	// delay of this goroutine or of the watchdog's adds to it.
	deadline := time.Now().Add(l.Validity())
	if d := deadline.Sub(start); d > ttl {
		t.Fatalf("lease valid until %v after the acquisition began, longer than the ttl %v: the holder could act after the store expired the lock", d, ttl)
	}
	<-l.Context().Done()
	lived := time.Since(start)
	if !errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", context.Cause(l.Context()))
	}
	// Its context ends at that deadline; a busy machine may tell this
	// goroutine late, but not by half a TTL.
	if lived > ttl+ttl/2 {
		t.Fatalf("lease context lived %v, well past the ttl %v", lived, ttl)
	}
	if lived < ttl/2 {
		t.Fatalf("lease context ended after %v, far earlier than the ttl %v", lived, ttl)
	}
	if l.Validity() != 0 {
		t.Fatalf("validity of an expired lease = %v", l.Validity())
	}
}

// testReleaseFreesAtOnce: after Release another client takes the key on
// its first try, and a second Release is refused without harm.
func testReleaseFreesAtOnce(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	a, b := h.client(t), h.client(t)
	l, err := a.TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("TryAcquire right after release: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if _, err := a.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("a second Release must not free B's lock; TryAcquire = %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testExtendMovesDeadline: Extend with a longer TTL on a lease without a
// watchdog keeps it alive past its first TTL.
func testExtendMovesDeadline(t *testing.T, h *Harness) {
	ttl := 2 * h.ttl()
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	c := h.client(t)
	l, err := c.TryAcquire(ctx, k, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 3*ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if v := l.Validity(); v <= ttl {
		t.Fatalf("validity after Extend(%v) = %v", 3*ttl, v)
	}
	time.Sleep(ttl + ttl/2)
	if l.Context().Err() != nil {
		t.Fatalf("lease ended before its extended TTL: %v", context.Cause(l.Context()))
	}
	if _, err := c.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("the store let another owner in before the extended TTL: %v", err)
	}
	if err := l.Extend(ctx, 0); !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Fatalf("Extend(0) = %v, want ErrInvalidTTL", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testDo: Do releases after fn, passes fn's error through, and reports a
// lease lost during fn.
func testDo(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	c := h.client(t)
	boom := errors.New("boom")
	err := turnstile.Do(ctx, c, k, func(ctx context.Context, l *turnstile.Lease) error {
		if l.Key() != k || l.Token() == 0 {
			return fmt.Errorf("lease key %q token %d", l.Key(), l.Token())
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	l, err := c.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("Do did not release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if h.Evict == nil {
		return
	}
	ttl := 2 * h.ttl()
	err = turnstile.Do(ctx, c, k, func(ctx context.Context, l *turnstile.Lease) error {
		h.Evict(t, k)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(ttl + 5*time.Second):
			return errors.New("fn's context was not cancelled after the lock was lost")
		}
	}, turnstile.WithTTL(ttl))
	if !errors.Is(err, turnstile.ErrLockLost) {
		t.Fatalf("Do with a lost lease = %v, want ErrLockLost", err)
	}
}

// testDistinctKeys: many goroutines on distinct keys all succeed at once.
func testDistinctKeys(t *testing.T, h *Harness) {
	const workers, perWorker = 32, 20
	ctx := ctxFor(t, time.Minute)
	c := h.client(t)
	base := key(t)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				l, err := c.TryAcquire(ctx, fmt.Sprintf("%s:%d:%d", base, w, i))
				if err != nil {
					errs <- err
					return
				}
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("uncontended key: %v", err)
	}
}
