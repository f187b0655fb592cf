package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// testRetryFirstThenQueue: with WithQueueWhenBusy on the store's queue
// (retrying on Harness.Plain if set), a waiter for a key whose acquisitions have needed few retries
// retries first and joins the queue after more than the threshold; once
// contended acquisitions push the key's mean above the threshold,
// waiters queue at once; uncontended ones bring retrying back. The
// queue, not the retries, must be what grants the lock in every case:
// the holder is released only once the waiter stands in it.
func testRetryFirstThenQueue(t *testing.T, h *Harness) {
	const threshold = 2
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	b := h.queuer(t)
	// The Client queues in q, which says when it is asked: a store's
	// queue length alone cannot tell a queued waiter from an attempt (a
	// ZooKeeper attempt adds a node for a moment).
	q := &queueSpy{Backend: b, asked: make(chan struct{}, 1)}
	if h.Plain != nil {
		b = h.Plain(t)
	}
	c := kindClient(t, b, turnstile.WithTTL(10*time.Second), turnstile.WithQueueWhenBusy(q, threshold),
		turnstile.WithBackoff(turnstile.Constant{Interval: 50 * time.Millisecond, MaxRetries: -1}))
	holders := kindClient(t, h.queuer(t), turnstile.WithTTL(10*time.Second))

	// contended acquires k while a holder holds it, and returns the
	// waiter's retries before it took the lock from the queue.
	contended := func() int {
		t.Helper()
		holder, err := holders.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("holder: %v", err)
		}
		before := h.Waiting(t, k)
		select {
		case <-q.asked: // an uncontended acquisition's
		default:
		}
		type result struct {
			retries int
			err     error
		}
		done := make(chan result, 1)
		go func() {
			var retries int
			l, err := c.Acquire(ctx, k, turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
				if e.Type == turnstile.EventAcquired {
					retries = e.Retries
				}
			})))
			if err == nil {
				err = l.Release(ctx)
			}
			done <- result{retries, err}
		}()
		select {
		case <-q.asked:
		case r := <-done:
			t.Fatalf("waiter returned before it queued: %d retries, %v", r.retries, r.err)
		}
		awaitWaiting(t, h, k, before+1, nil)
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("holder: %v", err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		return r.retries
	}
	if r := contended(); r != threshold {
		t.Fatalf("with a low mean the waiter made %d retries before it queued, want %d", r, threshold)
	}
	// Each contended acquisition adds at least threshold+1 to the mean,
	// which follows about the last ten: it is over the threshold after
	// at most 11 of them.
	queuedAtOnce := false
	for i := 2; i <= 12 && !queuedAtOnce; i++ {
		queuedAtOnce = contended() == 0
	}
	if !queuedAtOnce {
		t.Fatal("after 12 contended acquisitions waiters still retry first")
	}
	// Uncontended acquisitions bring the mean down again.
	for i := 0; ; i++ {
		if i == 12 {
			t.Fatal("after 12 uncontended acquisitions waiters still queue at once")
		}
		l, err := c.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if contended() == threshold {
			break
		}
	}
}

// queueSpy is a store's queue that says when it is asked.
type queueSpy struct {
	driver.Backend // a driver.Queuer
	asked          chan struct{}
}

func (q *queueSpy) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	select {
	case q.asked <- struct{}{}:
	default:
	}
	return q.Backend.(driver.Queuer).AcquireWait(ctx, key, owner, ttl)
}
