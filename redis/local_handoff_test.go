package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/redis"
)

// TestHandsOverWithinTheClient: waiters of one Client for one hot key
// take the lock from each other's releases without the store while the
// tokens leave room (a token that is not a multiple of the room was
// handed over locally): tokens strictly increase in the order of the
// critical sections, so fenced storage (fence.Redis) takes every
// section's write; a lease handed over holds the lock in the store under
// the previous lease's owner id and renews there; and the store runs far
// fewer scripts than one per acquisition.
func TestHandsOverWithinTheClient(t *testing.T) {
	srv, b := startDialled(t)
	ctx := ctxFor(t, 2*time.Minute)
	c := newClient(t, b, turnstile.WithTTL(8*time.Second))
	const workers, rounds, key = 8, 300, "hot"
	room := b.TokenRoom()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	guard, err := fence.NewRedis(rc)
	if err != nil {
		t.Fatal(err)
	}
	sold := fence.DataKey(key, "sold")

	type section struct {
		token uint64
		owner string
	}
	var (
		mu       sync.Mutex // taken only inside the critical section
		order    []section
		checked  bool
		wg       sync.WaitGroup
		failures = make(chan error, workers*rounds)
	)
	before := commandCounts(t, srv)
	for range workers {
		wg.Go(func() {
			for range rounds {
				l, err := c.Acquire(ctx, key)
				if err != nil {
					failures <- err
					return
				}
				mu.Lock()
				order = append(order, section{l.Token(), l.Owner()})
				check := !checked && l.Token()%room != 0
				checked = checked || check
				mu.Unlock()
				if _, err := guard.IncrBy(ctx, key, l.Token(), sold, 1); err != nil {
					failures <- fmt.Errorf("fenced write with token %d: %w", l.Token(), err)
				}
				if check {
					if err := heldInStore(ctx, b, l); err != nil {
						failures <- err
					}
				}
				if err := l.Release(ctx); err != nil {
					failures <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	after := commandCounts(t, srv)
	// The fenced writes are scripts too: one each.
	scripts := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"] - len(order)
	if got := srv.MustDo(t, "GET", sold); got != strconv.Itoa(len(order)) {
		t.Fatalf("fenced storage took %s writes of %d sections", got, len(order))
	}

	local := 0
	for i, s := range order {
		if i > 0 && s.token <= order[i-1].token {
			t.Fatalf("section %d got token %d after section %d's %d", i, s.token, i-1, order[i-1].token)
		}
		if s.token%room == 0 {
			continue // from the store
		}
		local++
		if i == 0 || s.token != order[i-1].token+1 || s.owner != order[i-1].owner {
			t.Fatalf("section %d: token %d owner %s, handed over without the store after token %d owner %s", i, s.token, s.owner, order[max(i-1, 0)].token, order[max(i-1, 0)].owner)
		}
	}
	n := workers * rounds
	t.Logf("%d acquisitions: %d handed over without the store, %d scripts run (%.2f per acquisition)", n, local, scripts, float64(scripts)/float64(n))
	if !checked {
		t.Fatal("no acquisition was handed over without the store")
	}
	// Through the store alone each acquisition costs at least one script
	// (a HandOff, or an acquisition and a release); with handoffs in the
	// Client up to 15 in 16 cost none. Half leaves room for waiters that
	// were not ready when a release came.
	if scripts > n/2 {
		t.Fatalf("%d scripts for %d acquisitions: the Client handed over through the store", scripts, n)
	}

	// Another Client's grant after them is above every token handed out.
	other := newClient(t, b)
	l, err := other.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if last := order[len(order)-1].token; l.Token() <= last {
		t.Fatalf("another client's token %d after the last handed-over %d", l.Token(), last)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// heldInStore checks that l's lock is held in the store under l's owner
// id, with the token of the run's grant from the store, and that the
// store renews it for l.
func heldInStore(ctx context.Context, b *redis.Backend, l *turnstile.Lease) error {
	st, err := b.Inspect(ctx, l.Key())
	if err != nil {
		return err
	}
	if !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != l.Owner() {
		return fmt.Errorf("lease with token %d handed over without the store: the store has %+v, want it held by %s", l.Token(), st, l.Owner())
	}
	if h := st.Holders[0].Token; h != l.Token()-l.Token()%b.TokenRoom() {
		return fmt.Errorf("lease with token %d handed over without the store: the store's holder has token %d, want the run's first", l.Token(), h)
	}
	if err := l.Extend(ctx, 8*time.Second); err != nil {
		return fmt.Errorf("extend a lease handed over without the store: %w", err)
	}
	return nil
}
