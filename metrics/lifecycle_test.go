package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// TestLeaseLifecycle drives a real Client through acquisition, contention,
// renewal, release, loss and Close, and checks every figure it exports.
func TestLeaseLifecycle(t *testing.T) {
	mem := memory.New()
	c, _, reg, rec := newClient(t, mem, turnstile.WithTTL(2*time.Second), turnstile.WithRenewInterval(20*time.Millisecond))
	ctx := ctxFor(t, 30*time.Second)

	l1, err := c.Acquire(ctx, "lock:inventory:1")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if got := gaugeOf(t, reg, "turnstile_leases_held", "memory"); got != 1 {
		t.Fatalf("leases_held after Acquire = %v, want 1", got)
	}

	// Contention: fail fast, then wait and give up.
	if _, err := c.TryAcquire(ctx, "lock:inventory:1"); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("TryAcquire on a held key: %v, want ErrNotAcquired", err)
	}
	_, err = c.Acquire(ctx, "lock:inventory:1", turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 2 * time.Millisecond, MaxRetries: 3}))
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("Acquire on a held key with 3 retries: %v, want ErrNotAcquired", err)
	}
	if got := gaugeOf(t, reg, "turnstile_waiters", "memory"); got != 0 {
		t.Fatalf("waiters after the wait gave up = %v, want 0", got)
	}

	// The watchdog renews l1.
	eventually(t, "two watchdog renewals", func() bool {
		return value(t, reg, "turnstile_renewals_total", "backend", "memory", "outcome", "ok") >= 2
	})
	if err := l1.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// Loss: the key is evicted behind the holder's back; its next renewal
	// is refused. Releasing the lost lease afterwards must not count it
	// out twice.
	l2, err := c.Acquire(ctx, "lock:inventory:2")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if !mem.Evict("lock:inventory:2") {
		t.Fatal("Evict found no lock")
	}
	select {
	case <-l2.Context().Done():
	case <-ctx.Done():
		t.Fatal("the evicted lease was never reported lost")
	}
	// Releasing a lease already reported lost is not a second ending.
	if err := l2.Release(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Fatalf("Release of a lost lease: %v, want ErrNotHeld", err)
	}

	// Close ends a held lease with ErrClosed: not a forced expiry.
	if _, err := c.Acquire(ctx, "lock:inventory:3"); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	want := `
# HELP turnstile_acquisitions_total Acquire and TryAcquire calls by outcome: acquired, not_acquired (the lock stayed held), error (store or context error).
# TYPE turnstile_acquisitions_total counter
turnstile_acquisitions_total{backend="memory",outcome="acquired"} 3
turnstile_acquisitions_total{backend="memory",outcome="error"} 0
turnstile_acquisitions_total{backend="memory",outcome="not_acquired"} 2
# HELP turnstile_forced_expiries_total Leases lost while held, without Release: a renewal was refused or the lease's deadline passed without one.
# TYPE turnstile_forced_expiries_total counter
turnstile_forced_expiries_total{backend="memory"} 1
# HELP turnstile_leases_held Leases held now: acquired and neither released nor lost.
# TYPE turnstile_leases_held gauge
turnstile_leases_held{backend="memory"} 0
# HELP turnstile_releases_total Lease.Release calls by outcome: released, not_held (the store no longer held the lease), error (store error).
# TYPE turnstile_releases_total counter
turnstile_releases_total{backend="memory",outcome="error"} 0
turnstile_releases_total{backend="memory",outcome="not_held"} 0
turnstile_releases_total{backend="memory",outcome="released"} 1
# HELP turnstile_waiters Acquire calls waiting now for a lock another owner holds.
# TYPE turnstile_waiters gauge
turnstile_waiters{backend="memory"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"turnstile_acquisitions_total", "turnstile_forced_expiries_total", "turnstile_leases_held",
		"turnstile_releases_total", "turnstile_waiters"); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "turnstile_renewals_total", "backend", "memory", "outcome", "refused"); got != 1 {
		t.Errorf("renewals refused = %v, want 1 (the evicted lease)", got)
	}
	if got := value(t, reg, "turnstile_renewals_total", "backend", "memory", "outcome", "error"); got != 0 {
		t.Errorf("renewals failed = %v, want 0", got)
	}

	// Latency and retries: one sample per acquisition; the retries are
	// the ones the Client reported.
	n, sum := histogram(t, reg, "turnstile_acquire_duration_seconds", "backend", "memory", "outcome", "not_acquired")
	if n != 2 || sum <= 0 {
		t.Errorf("latency of the failed acquisitions: %d samples summing to %vs, want 2 and > 0", n, sum)
	}
	if n, _ := histogram(t, reg, "turnstile_acquire_duration_seconds", "backend", "memory", "outcome", "acquired"); n != 3 {
		t.Errorf("latency of the granted acquisitions: %d samples, want 3", n)
	}
	wantSum, wantCount := rec.retries()
	n, retries := histogram(t, reg, "turnstile_acquire_retries", "backend", "memory")
	if int(n) != wantCount || int(retries) != wantSum || retries < 1 {
		t.Errorf("retries histogram: %d acquisitions, %v retries; the Client reported %d and %d (the waiting Acquire retried)", n, retries, wantCount, wantSum)
	}
}

// TestWaitersGauge counts a caller that waits while it waits, and counts
// it out when it gets the lock.
func TestWaitersGauge(t *testing.T) {
	c, _, reg, _ := newClient(t, memory.New())
	ctx := ctxFor(t, 30*time.Second)
	holder, err := c.Acquire(ctx, "lock:order:42")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "lock:order:42", turnstile.WithBackoff(turnstile.Exponential{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1}))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	eventually(t, "one waiter", func() bool { return gaugeOf(t, reg, "turnstile_waiters", "memory") == 1 })
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	if w := gaugeOf(t, reg, "turnstile_waiters", "memory"); w != 0 {
		t.Errorf("waiters after the waiter got the lock = %v, want 0", w)
	}
	if h := gaugeOf(t, reg, "turnstile_leases_held", "memory"); h != 0 {
		t.Errorf("leases_held after both released = %v, want 0", h)
	}
	if a := value(t, reg, "turnstile_acquisitions_total", "backend", "memory", "outcome", "acquired"); a != 2 {
		t.Errorf("acquired = %v, want 2", a)
	}
}

// TestStoreErrors counts failed acquisitions and renewals as errors, and
// a lease whose renewals fail until its deadline as a forced expiry.
func TestStoreErrors(t *testing.T) {
	f := &flaky{mem: memory.New()}
	c, _, reg, rec := newClient(t, f, turnstile.WithTTL(300*time.Millisecond), turnstile.WithRenewInterval(20*time.Millisecond))
	ctx := ctxFor(t, 30*time.Second)

	f.failAcquire.Store(true)
	if _, err := c.TryAcquire(ctx, "lock:job:nightly"); !errors.Is(err, errFlaky) {
		t.Fatalf("TryAcquire on a failing store: %v, want the store's error", err)
	}
	f.failAcquire.Store(false)
	if got := value(t, reg, "turnstile_acquisitions_total", "backend", "flaky", "outcome", "error"); got != 1 {
		t.Fatalf("acquisitions with outcome error = %v, want 1", got)
	}

	l, err := c.Acquire(ctx, "lock:job:nightly")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	f.failExtend.Store(true)
	select {
	case <-l.Context().Done():
	case <-ctx.Done():
		t.Fatal("a lease whose renewals all fail was never reported lost")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, turnstile.ErrLockLost) {
		t.Fatalf("lease ended with %v, want ErrLockLost", cause)
	}

	// The lease's context ends before its loss is reported: Close waits
	// for the watchdog, and so for the report.
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Every failed renewal the Client reported, and the loss at the
	// deadline, count as renewal errors.
	rec.mu.Lock()
	failed := 0
	for _, e := range rec.events {
		if e.Type == turnstile.EventRenewFailed || e.Type == turnstile.EventLost && e.Renewal && !e.Refused {
			failed++
		}
	}
	rec.mu.Unlock()
	got := value(t, reg, "turnstile_renewals_total", "backend", "flaky", "outcome", "error")
	if got < 2 || int(got) != failed {
		t.Errorf("renewal errors = %v, want the %d the Client reported (at least one failure and the loss)", got, failed)
	}
	if got := value(t, reg, "turnstile_forced_expiries_total", "backend", "flaky"); got != 1 {
		t.Errorf("forced expiries = %v, want 1", got)
	}
	if got := gaugeOf(t, reg, "turnstile_leases_held", "flaky"); got != 0 {
		t.Errorf("leases_held after the loss = %v, want 0", got)
	}
}
