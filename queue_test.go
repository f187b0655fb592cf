package turnstile_test

import (
	"context"
	"errors"
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

// TestQueueWhenBusy: once acquisitions need many retries, Acquire waits
// in the store's queue instead of retrying.
func TestQueueWhenBusy(t *testing.T) {
	ctx := context.Background()
	q := &queued{flaky: newFlaky()}
	c := newClient(t, q.flaky, turnstile.WithQueueWhenBusy(q, 2),
		turnstile.WithBackoff(turnstile.Exponential{Base: 100 * time.Microsecond, Cap: 200 * time.Microsecond, MaxRetries: -1}))
	holder, err := c.TryAcquire(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); _ = holder.Release(ctx) }()
	l, err := c.Acquire(ctx, "busy") // retries many times: the mean jumps over 2
	if err != nil {
		t.Fatal(err)
	}
	if q.waits.Load() != 0 {
		t.Fatal("queued before the retries ran high")
	}
	go func() { time.Sleep(20 * time.Millisecond); _ = l.Release(ctx) }()
	l2, err := c.Acquire(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	_ = l2.Release(ctx)
	if q.waits.Load() != 1 {
		t.Fatalf("%d queued acquisitions after the retries ran high, want 1", q.waits.Load())
	}
	for _, bad := range []turnstile.Option{turnstile.WithQueueWhenBusy(nil, 1), turnstile.WithQueueWhenBusy(q, -1)} {
		if _, err := turnstile.New(q.flaky, bad); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("bad option: %v", err)
		}
	}
}
