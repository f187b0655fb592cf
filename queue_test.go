package turnstile_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// queued is a store that queues waiters itself (driver.Queuer); here the
// queue is a poll of the memory store, which is enough to see how the
// Client uses it.
type queued struct {
	*flaky
	waits atomic.Int32
}

func (q *queued) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	q.waits.Add(1)
	for {
		tok, ok, err := q.Backend.Acquire(ctx, key, owner, ttl)
		if err != nil {
			return 0, err
		}
		if ok {
			return tok, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func TestAcquireUsesTheStoresQueue(t *testing.T) {
	ctx := context.Background()
	q := &queued{flaky: newFlaky()}
	c := newClient(t, q)
	holder, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if q.waits.Load() != 0 {
		t.Fatal("TryAcquire queued")
	}
	go func() { time.Sleep(30 * time.Millisecond); _ = holder.Release(ctx) }()
	before := q.extends.Load()
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if q.waits.Load() != 1 {
		t.Fatalf("Acquire called AcquireWait %d times, want 1", q.waits.Load())
	}
	if q.extends.Load() == before {
		t.Fatal("the grant from the queue was not renewed before the lease started")
	}
	if l.Token() <= holder.Token() {
		t.Fatalf("token %d not above the previous holder's %d", l.Token(), holder.Token())
	}
	_ = l.Release(ctx)
}

func TestQueueWaitIsBoundedByTheBackoff(t *testing.T) {
	ctx := context.Background()
	q := &queued{flaky: newFlaky()}
	c := newClient(t, q, turnstile.WithBackoff(turnstile.Exponential{Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: 3}))
	holder, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	start := time.Now()
	_, err = c.Acquire(ctx, "k")
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("err = %v, want ErrNotAcquired after the budget (10+20+20 ms)", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the 50ms budget", waited)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Acquire(cctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waits := q.waits.Load()
	if _, err := c.Acquire(ctx, "k", turnstile.WithBackoff(turnstile.NoRetry())); !errors.Is(err, turnstile.ErrNotAcquired) || q.waits.Load() != waits {
		t.Fatalf("NoRetry: err = %v, queued %d times; want one attempt without queueing", err, q.waits.Load()-waits)
	}
}

// TestQueueWhenBusy: a waiter retries first and queues in the store
// after more than threshold retries; once the key's mean of retries per
// acquisition exceeds threshold, callers of that key queue at once;
// acquisitions that wait little bring the mean down and retrying back.
// With a threshold of 2 and a queue wait far shorter than the Backoff's
// 300 ms rounds (a loaded machine has stretched a wait past 200 ms), a contended acquisition adds 3 to the mean (its three
// attempts), so the mean first exceeds 2 after 11 of them:
// 3×(1−0.9¹¹) ≈ 2.06; one that queues at once and waits less than a
// round adds 0, and 2.06×0.9 < 2.
func TestQueueWhenBusy(t *testing.T) {
	ctx := context.Background()
	q := &queued{flaky: newFlaky()}
	c := newClient(t, q.flaky, turnstile.WithQueueWhenBusy(q, 2),
		turnstile.WithBackoff(turnstile.Constant{Interval: 300 * time.Millisecond, MaxRetries: -1}))
	// contended acquires key while another lease holds it, released once
	// the waiter queues. It returns the waiter's retries, and whether it
	// queued.
	contended := func(key string) (retries int, queued bool) {
		t.Helper()
		holder, err := c.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		waits := q.waits.Load()
		go func() {
			for q.waits.Load() == waits {
				time.Sleep(100 * time.Microsecond)
			}
			_ = holder.Release(ctx)
		}()
		var got turnstile.Event
		l, err := c.Acquire(ctx, key, turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
			if e.Type == turnstile.EventAcquired {
				got = e
			}
		})))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return got.Retries, q.waits.Load() > waits
	}
	for i := 1; i <= 11; i++ {
		if r, queued := contended("busy"); r != 2 || !queued {
			t.Fatalf("contended acquisition %d: %d retries, queued %v; want 2 retries, then the queue", i, r, queued)
		}
	}
	// Each key has its own mean.
	if r, queued := contended("calm"); r != 2 || !queued {
		t.Fatalf("another key: %d retries, queued %v; want 2 retries, then the queue", r, queued)
	}
	if r, queued := contended("busy"); r != 0 || !queued {
		t.Fatalf("after 11 contended acquisitions: %d retries, queued %v; want the queue at once", r, queued)
	}
	if r, queued := contended("busy"); r != 2 || !queued {
		t.Fatalf("once the mean fell: %d retries, queued %v; want retries first again", r, queued)
	}

	// nil on a backend that does not queue, a queue that does not queue,
	// a bad threshold.
	for _, bad := range []turnstile.Option{turnstile.WithQueueWhenBusy(nil, 1), turnstile.WithQueueWhenBusy(q.flaky, 1), turnstile.WithQueueWhenBusy(q, -1)} {
		if _, err := turnstile.New(q.flaky, bad); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("bad option: %v", err)
		}
	}
	// nil: the backend's own queue.
	if _, err := turnstile.New(q, turnstile.WithQueueWhenBusy(nil, 1)); err != nil {
		t.Fatalf("WithQueueWhenBusy(nil, 1) on a backend that queues: %v", err)
	}
}

// TestClientWideOptionsRefusedPerCall: an option that belongs to the
// Client is refused, by name, when given to one call.
func TestClientWideOptionsRefusedPerCall(t *testing.T) {
	ctx := context.Background()
	q := &queued{flaky: newFlaky()}
	c := newClient(t, q.flaky)
	for name, o := range map[string]turnstile.Option{
		"WithLogger":        turnstile.WithLogger(slog.Default()),
		"WithQueueWhenBusy": turnstile.WithQueueWhenBusy(q, 1),
	} {
		for call, f := range map[string]func() error{
			"Acquire":    func() error { _, err := c.Acquire(ctx, "k", o); return err },
			"TryAcquire": func() error { _, err := c.TryAcquire(ctx, "k", o); return err },
			"Do": func() error {
				return turnstile.Do(ctx, c, "k", func(context.Context, *turnstile.Lease) error { return nil }, o)
			},
		} {
			err := f()
			if !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s(…, %s) = %v; want ErrInvalidOption naming %s", call, name, err, name)
			}
		}
	}
	if held, err := c.TryAcquire(ctx, "k"); err != nil {
		t.Fatalf("a refused option left the key held: %v", err)
	} else {
		_ = held.Release(ctx)
	}
}

// timedQueued is a queued store whose grants say from when it holds them
// (driver.TimedQueuer): age before the grant.
type timedQueued struct {
	*queued
	age time.Duration
}

func (q *timedQueued) AcquireWaitSince(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Time, error) {
	since := time.Now().Add(-q.age)
	tok, err := q.AcquireWait(ctx, key, owner, ttl)
	return tok, since, err
}

// TestTimedQueueGrantIsNotRenewed: a grant from a queue that says from
// when the store holds it starts the lease then, without a renewal; one
// the store holds for less than nothing is refused and given back.
func TestTimedQueueGrantIsNotRenewed(t *testing.T) {
	ctx := context.Background()
	q := &timedQueued{queued: &queued{flaky: newFlaky()}}
	const ttl = 10 * time.Second
	c := newClient(t, q, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	for _, age := range []time.Duration{0, 4 * time.Second} {
		q.age = age
		extends := q.extends.Load()
		l, err := c.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if n := q.extends.Load() - extends; n != 0 {
			t.Fatalf("granted %v ago: %d renewals before the lease started, want none", age, n)
		}
		// The validity counts from the store's time, less drift: above
		// ttl − age − 1 s, not above ttl − age.
		if v := l.Validity(); v > ttl-age || v < ttl-age-time.Second {
			t.Fatalf("granted %v ago: validity %v, want (%v, %v]", age, v, ttl-age-time.Second, ttl-age)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	q.age = ttl + time.Second
	_, err := c.Acquire(ctx, "k")
	if !errors.Is(err, turnstile.ErrNotAcquired) || !strings.Contains(err.Error(), "granted it longer ago than the ttl") {
		t.Fatalf("granted %v ago: err = %v, want ErrNotAcquired saying so", q.age, err)
	}
	awaitGivenBack(t, newClient(t, q.flaky), "k", ttl/2)
}

// timedStore is a store whose grants say from when it holds them
// (driver.TimedAcquirer): age before the grant.
type timedStore struct {
	*flaky
	age time.Duration
}

func (s *timedStore) AcquireSince(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, time.Time, error) {
	since := time.Now().Add(-s.age)
	tok, ok, err := s.Acquire(ctx, key, owner, ttl)
	return tok, ok, since, err
}

// TestTimedGrantStartsTheLease: a grant that says from when the store
// holds it starts the lease then, or at the call's start if that is
// earlier; one the store holds for less than nothing is refused and
// given back.
func TestTimedGrantStartsTheLease(t *testing.T) {
	ctx := context.Background()
	s := &timedStore{flaky: newFlaky()}
	const ttl = 10 * time.Second
	c := newClient(t, s, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	for _, age := range []time.Duration{-5 * time.Second, 0, 4 * time.Second} {
		s.age = age
		l, err := c.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		from := max(age, 0)
		if v := l.Validity(); v > ttl-from || v < ttl-from-time.Second {
			t.Fatalf("granted %v ago: validity %v, want (%v, %v]", age, v, ttl-from-time.Second, ttl-from)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.age = ttl + time.Second
	_, err := c.TryAcquire(ctx, "k")
	if !errors.Is(err, turnstile.ErrNotAcquired) || !strings.Contains(err.Error(), "longer than the ttl") {
		t.Fatalf("granted %v ago: err = %v, want ErrNotAcquired saying so", s.age, err)
	}
	awaitGivenBack(t, newClient(t, s.flaky), "k", ttl/2)
}

// awaitGivenBack waits until c can take key, a lock given back in the
// background, for up to within.
func awaitGivenBack(t *testing.T, c *turnstile.Client, key string, within time.Duration) {
	t.Helper()
	for give := time.Now().Add(within); ; time.Sleep(time.Millisecond) {
		l, err := c.TryAcquire(context.Background(), key)
		if err == nil {
			_ = l.Release(context.Background())
			return
		}
		if time.Now().After(give) {
			t.Fatalf("a grant refused as too old was not given back: %v", err)
		}
	}
}
