// Package handofftest runs a Client's handoffs without the store, for the
// tests of stores that number them in a token room (redis, redlock).
package handofftest

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// WaitingClient is a Client over b whose acquisitions report, on the
// channel, that they wait. It is closed when the test ends.
func WaitingClient(t testing.TB, b driver.Backend) (*turnstile.Client, <-chan struct{}) {
	t.Helper()
	waiting := make(chan struct{}, 16)
	c, err := turnstile.New(b, turnstile.WithTTL(20*time.Second), turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
		if e.Type == turnstile.EventWaiting {
			waiting <- struct{}{}
		}
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, waiting
}

// HandedRun acquires key through c and releases each lease to a waiter of
// c until it holds a run of n leases that were handed over without the
// store (tokens T, T+1, …, T+n−1, T the store's); section runs in each
// lease of the run but the last, which is returned held. The head of c's
// line takes a handoff without the store once it waits on its signals,
// which it does right after it reports, on waiting, that it waits; a
// release that comes before goes through the store and starts the run
// again.
func HandedRun(t *testing.T, ctx context.Context, c *turnstile.Client, waiting <-chan struct{}, key string, n int, section func(*turnstile.Lease)) []*turnstile.Lease {
	t.Helper()
	cur, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	run := []*turnstile.Lease{cur}
	for attempt := 0; len(run) < n; attempt++ {
		if attempt == 50 {
			t.Fatalf("no run of %d leases handed over without the store in %d releases", n, attempt)
		}
		section(cur)
		got := make(chan *turnstile.Lease, 1)
		go func() {
			l, err := c.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		select {
		case <-waiting:
		case <-ctx.Done():
			t.Fatal("the waiter never reported waiting")
		}
		time.Sleep(20 * time.Millisecond)
		if err := cur.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next == nil {
			t.FailNow()
		}
		if next.Token() == cur.Token()+1 && next.Owner() == cur.Owner() {
			run = append(run, next)
		} else {
			run = []*turnstile.Lease{next}
		}
		cur = next
	}
	return run
}
