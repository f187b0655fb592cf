package redis_test

import (
	"context"
	"strconv"
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

// TestWaiterAcquiresAfterItsNoticeIsLost: the waiter's subscription
// connection is killed while it waits — while it is still subscribing, or
// once subscribed — so the release notice may never reach it; it still
// takes the lock once the holder releases (its resubscription or, at the
// latest, its backoff timer), and its own release works.
func TestWaiterAcquiresAfterItsNoticeIsLost(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 2*time.Minute)
	holderC, err := turnstile.New(dial(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer holderC.Close()
	waiterC, err := turnstile.New(dial(t, srv), turnstile.WithBackoff(fixedBackoff(2*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer waiterC.Close()
	for round := range 20 {
		key := "lost-notice-" + strconv.Itoa(round)
		holder, err := holderC.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := waiterC.Acquire(ctx, key)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		if round%2 == 1 { // subscribed first
			for srv.MustDo(t, "CLIENT", "LIST", "TYPE", "pubsub") == "" && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
		}
		srv.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub")
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("round %d: waiter after a lost notice: %v", round, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: the waiter sat on a free lock after its notice was lost", round)
		}
	}
}
