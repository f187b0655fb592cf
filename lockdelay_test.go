package turnstile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// The store-level behaviour of the lock delay (a failed holder's lock
// kept for TTL + delay, a clean release freeing at once, a lost lease's
// Release refused) is the conformance case locktest's LockDelay, which
// every store runs. These tests cover the Client's side: options, URLs,
// refusals, what each path sends to the store.

func TestWithLockDelayBounds(t *testing.T) {
	b := memory.New()
	for _, d := range []time.Duration{-time.Nanosecond, -time.Second, turnstile.MaxLockDelay + time.Nanosecond, 48 * time.Hour} {
		if _, err := turnstile.New(b, turnstile.WithLockDelay(d)); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("WithLockDelay(%v) = %v, want ErrInvalidOption", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond, turnstile.MaxLockDelay} {
		c, err := turnstile.New(b, turnstile.WithLockDelay(d))
		if err != nil {
			t.Errorf("WithLockDelay(%v): %v", d, err)
			continue
		}
		_ = c.Close()
	}
}

// heldFor is how long b's store keeps key for its holder.
func heldFor(t *testing.T, b *memory.Backend, key string) time.Duration {
	t.Helper()
	_, _, left, ok := b.Holder(key)
	if !ok {
		t.Fatalf("%s is not held in the store", key)
	}
	return left
}

// TestLockDelayEveryPathAsksForIt: Acquire, TryAcquire, the per-call
// option, Lease.Extend and the watchdog's renewals ask the store for
// TTL + delay, while the lease counts the TTL alone.
func TestLockDelayEveryPathAsksForIt(t *testing.T) {
	const ttl, d = time.Second, time.Minute
	b := memory.New()
	ctx := context.Background()
	c := newClient(t, b, turnstile.WithTTL(ttl), turnstile.WithLockDelay(d))
	l, err := c.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if v := l.Validity(); v > ttl {
		t.Fatalf("Validity %v: the lease must count the TTL %v alone", v, ttl)
	}
	if left := heldFor(t, b, "a"); left <= ttl+d/2 {
		t.Fatalf("Acquire: the store holds the lock for %v, want about %v", left, ttl+d)
	}
	if err := l.Extend(ctx, 2*ttl); err != nil {
		t.Fatal(err)
	}
	if left := heldFor(t, b, "a"); left <= 2*ttl+d/2 {
		t.Fatalf("Extend: the store holds the lock for %v, want about %v", left, 2*ttl+d)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Per call, on a Client without a delay.
	plain := newClient(t, b, turnstile.WithTTL(ttl))
	l, err = plain.TryAcquire(ctx, "b", turnstile.WithLockDelay(d))
	if err != nil {
		t.Fatal(err)
	}
	if left := heldFor(t, b, "b"); left <= ttl+d/2 {
		t.Fatalf("per-call option: the store holds the lock for %v, want about %v", left, ttl+d)
	}
	// The watchdog renews at TTL/3: once it has, the hold counts from the
	// renewal, with the delay.
	time.Sleep(ttl)
	if l.Validity() == 0 {
		t.Fatalf("lease lost: %v", context.Cause(l.Context()))
	}
	if left := heldFor(t, b, "b"); left <= ttl+d/2 {
		t.Fatalf("after renewals the store holds the lock for %v, want about %v", left, ttl+d)
	}
	_ = l.Release(ctx)
	l, err = plain.TryAcquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if left := heldFor(t, b, "c"); left > ttl {
		t.Fatalf("without a delay the store holds the lock for %v, more than the TTL %v", left, ttl)
	}
	_ = l.Release(ctx)
}

// plainStore is a backend that does not say it holds locks for their
// TTL alone (no driver.TTLHolder).
type plainStore struct{ b *memory.Backend }

func (p plainStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return p.b.Acquire(ctx, key, owner, ttl)
}
func (p plainStore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return p.b.Extend(ctx, key, owner, ttl)
}
func (p plainStore) Release(ctx context.Context, key, owner string) (bool, error) {
	return p.b.Release(ctx, key, owner)
}

func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, turnstile.ErrInvalidOption) || !errors.Is(err, turnstile.ErrUnsupported) {
		t.Fatalf("%s: %v, want ErrInvalidOption and ErrUnsupported", what, err)
	}
}

// TestLockDelayRefused: a store that cannot keep the delay, and every
// lock kind's view, are refused with a lock delay, for the Client and
// per call; so is a busy queue that cannot keep it.
func TestLockDelayRefused(t *testing.T) {
	ctx := context.Background()
	m := memory.New()
	_, err := turnstile.New(plainStore{m}, turnstile.WithLockDelay(time.Second))
	wantRefused(t, "New over a store without TTLHolder", err)
	c := newClient(t, plainStore{m})
	_, err = c.TryAcquire(ctx, "k", turnstile.WithLockDelay(time.Second))
	wantRefused(t, "TryAcquire with a per-call lock delay", err)
	if l, err := c.TryAcquire(ctx, "k", turnstile.WithLockDelay(0)); err != nil {
		t.Fatalf("a zero lock delay is no lock delay: %v", err)
	} else {
		_ = l.Release(ctx)
	}

	sem, err := turnstile.Semaphore(m, 2)
	if err != nil {
		t.Fatal(err)
	}
	re, err := turnstile.Reentrant(m)
	if err != nil {
		t.Fatal(err)
	}
	read, write, err := turnstile.ReadWrite(m)
	if err != nil {
		t.Fatal(err)
	}
	fair, err := turnstile.Fair(m)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]driver.Backend{"semaphore": sem, "reentrant": re, "read": read, "write": write, "fair": fair} {
		_, err := turnstile.New(v, turnstile.WithLockDelay(time.Second))
		wantRefused(t, name+" view", err)
	}
	_, err = turnstile.New(m, turnstile.WithQueueWhenBusy(fair, 0), turnstile.WithLockDelay(time.Second))
	wantRefused(t, "a busy queue without TTLHolder", err)
}

// TestLockDelayURL: lock_delay= on a backend URL sets the delay, is
// taken out before the backend reads the URL, and bad values are
// refused at Open.
func TestLockDelayURL(t *testing.T) {
	ctx := context.Background()
	c, err := turnstile.Open(ctx, "mem://?lock_delay=1m", turnstile.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].TTL <= 30*time.Second {
		t.Fatalf("lock_delay=1m: the store holds the lock as %+v, want about 61s", st.Holders)
	}
	_ = l.Release(ctx)

	same, err := turnstile.Open(ctx, "mem://?lock_delay=2s", turnstile.WithLockDelay(2*time.Second))
	if err != nil {
		t.Fatalf("a URL and an option that agree: %v", err)
	}
	_ = same.Close()

	for _, raw := range []string{
		"mem://?lock_delay=abc",
		"mem://?lock_delay=",
		"mem://?lock_delay=-1s",
		"mem://?lock_delay=2h",
		"mem://?lock_delay=1s&lock_delay=1s",
		"mem://?lock_delay=1s&ttl=2s", // the rest still goes to the backend
	} {
		c, err := turnstile.Open(ctx, raw)
		if err == nil {
			_ = c.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if !errors.Is(err, turnstile.ErrInvalidOption) && !errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOption", raw, err)
		}
	}
	_, err = turnstile.Open(ctx, "mem://?lock_delay=2s", turnstile.WithLockDelay(3*time.Second))
	if !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("a URL and an option that disagree: %v", err)
	}
}

// TestLockDelayHandoffIsClean: a lease of a Client with a lock delay
// that releases hands the lock to the next waiter of the same Client at
// once (a handoff without the store, or through it): a clean release.
func TestLockDelayHandoffIsClean(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newRoomy()
	c := newClient(t, b, turnstile.WithTTL(8*time.Second), turnstile.WithLockDelay(time.Hour))
	l, err := c.Acquire(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := c.Acquire(ctx, "hot")
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	for !turnstile.HeadReady(c, "hot") {
		time.Sleep(time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the next waiter after a clean release: %v", err)
	}
}

// TestLockDelayElection: the Client's lock delay holds for an election's
// lease too: a leader that fails leaves the leadership to the store for
// TTL + delay, one that resigns hands it on at once.
func TestLockDelayElection(t *testing.T) {
	const ttl, d = time.Second, time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := memory.New()
	c := newClient(t, b, turnstile.WithTTL(ttl), turnstile.WithLockDelay(d))
	e := mustElection(t, c, "leader")
	lead := mustCampaign(t, ctx, e, "me")
	st, err := c.Inspect(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].TTL <= ttl+d/2 {
		t.Fatalf("the leader's lock is held as %+v, want about %v", st.Holders, ttl+d)
	}
	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Inspect(ctx, "leader"); err != nil || st.Held {
		t.Fatalf("after Resign the leadership is %+v, %v: want free at once", st, err)
	}
}

// FuzzLockDelayURL: whatever the query, Open of a mem:// URL with it
// never panics, and refuses what it does not take with ErrInvalidOption
// or ErrInvalidURL.
func FuzzLockDelayURL(f *testing.F) {
	for _, q := range []string{"lock_delay=2s", "lock_delay=", "lock_delay=%zz", "lock%5Fdelay=1s", "lock_delay=1s&lock_delay=2s", "lock_delay=-1ns", "x=1&lock_delay=1h", "lock_delay=1h0m0.000000001s"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c, err := turnstile.Open(context.Background(), "mem://?"+q)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidOption) && !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("Open(mem://?%s) = %v, want ErrInvalidOption or ErrInvalidURL", q, err)
			}
			return
		}
		_ = c.Close()
	})
}
