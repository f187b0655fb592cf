package redis_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestHerdNeverSitsOnAFreeLock: ten waiters in two Clients, and in one,
// take one key in turn three times each, 200 times over. Their backoff is 5 s, so only
// release notices and local handoffs (quiet or aloud) can move them on in
// time: a waiter left sitting on a free lock shows as a round that takes
// seconds. In one Client nobody else fails to take the lock, so its
// releases send no notice: an aloud release must wake the line's head
// itself.
func TestHerdNeverSitsOnAFreeLock(t *testing.T) {
	for _, n := range []int{2, 1} {
		t.Run("clients="+strconv.Itoa(n), func(t *testing.T) { herdNeverSitsOnAFreeLock(t, n) })
	}
}

func herdNeverSitsOnAFreeLock(t *testing.T, n int) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 2*time.Minute)
	var clients []*turnstile.Client
	for range n {
		b := dial(t, srv)
		c := newClient(t, b, turnstile.WithBackoff(fixedBackoff(5*time.Second)))
		clients = append(clients, c)
	}
	for round := range 200 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for w := range 10 {
			wg.Go(func() {
				// Three turns each: more releases in a row than a Client
				// hands to its own waiters before one is aloud.
				for range 3 {
					l, err := clients[w%n].Acquire(rctx, "herd")
					if err != nil {
						errs <- err
						return
					}
					if err := l.Release(rctx); err != nil {
						errs <- err
						return
					}
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
	holderC := newClient(t, dial(t, srv))
	waiterC := newClient(t, dial(t, srv), turnstile.WithBackoff(fixedBackoff(2*time.Second)))
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

// TestClientsShareAHotKey: eight Clients, eight waiters each, take one key
// over and over; every Client gets a fair part of the acquisitions (at
// least a quarter of the mean). Each release notice sets off an attempt
// in every Client: attempting at once, the same Client would win the race
// time after time and the others starve.
func TestClientsShareAHotKey(t *testing.T) {
	srv, ctx := startRedis(t)
	const clients, per, want = 8, 8, 12000
	var cs []*turnstile.Client
	for range clients {
		c := newClient(t, dial(t, srv), turnstile.WithBackoff(fixedBackoff(5*time.Second)))
		cs = append(cs, c)
	}
	counts := make([]atomic.Int64, clients)
	var total atomic.Int64
	wctx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := range clients * per {
		wg.Go(func() {
			for total.Load() < want && wctx.Err() == nil {
				l, err := cs[w%clients].Acquire(wctx, "shared-hot")
				if err != nil {
					return
				}
				counts[w%clients].Add(1)
				total.Add(1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := make([]int64, clients)
	for i := range counts {
		got[i] = counts[i].Load()
	}
	n := total.Load()
	if n < want/2 {
		t.Fatalf("%d acquisitions in 30 s, want %d", n, want)
	}
	t.Logf("acquisitions per Client: %v", got)
	for i, g := range got {
		if g < n/clients/4 {
			t.Errorf("Client %d took %d of %d acquisitions, less than a quarter of its share: %v", i, g, n, got)
		}
	}
}
