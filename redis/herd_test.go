package redis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestHerdNeverSitsOnAFreeLock: ten waiters in two Clients take one key
// in turn, 200 times over. Their backoff is 5 s, so only release notices
// and local handoffs (quiet or aloud) can move them on in time: a waiter
// left sitting on a free lock shows as a round that takes seconds.
func TestHerdNeverSitsOnAFreeLock(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 2*time.Minute)
	var clients []*turnstile.Client
	for range 2 {
		b := dial(t, srv)
		c, err := turnstile.New(b, turnstile.WithBackoff(fixedBackoff(5*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	for round := range 200 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for w := range 10 {
			wg.Go(func() {
				l, err := clients[w%2].Acquire(rctx, "herd")
				if err != nil {
					errs <- err
					return
				}
				if err := l.Release(rctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		cancel()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d (after %v): %v", round, time.Since(start), err)
		}
	}
}
