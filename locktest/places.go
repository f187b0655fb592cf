package locktest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// testPlacesReported: while a holder holds the key, three waiters join
// its queue one after another, each asking for its place with
// WithQueuePosition. Each is told its place on joining (1, 2, 3: 1 is
// next), then places that only go down as those ahead take the lock and
// leave, and they are served in arrival order. A store may learn of a
// move late and skip a place, but each holder holds for 300 ms, so the
// waiters behind it are told of at least one move.
func testPlacesReported(t *testing.T, h *Harness) {
	const waiters = 3
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	holder := kindClient(t, h.queuer(t))
	first, err := holder.TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	base := h.Waiting(t, k)

	var (
		mu     sync.Mutex
		places = make([][]int, waiters)
		served []int
	)
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		c := kindClient(t, h.queuer(t), patient, turnstile.WithQueuePosition(func(p int) {
			mu.Lock()
			places[i] = append(places[i], p)
			mu.Unlock()
		}))
		wg.Go(func() {
			l, err := c.Acquire(ctx, k)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
			time.Sleep(300 * time.Millisecond) // time for those behind to learn they moved up
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		})
		awaitWaiting(t, h, k, base+i+1, errs)
		// Told its place before the next one joins: the report follows
		// the store's answer that made the queue grow.
		deadline := time.Now().Add(15 * time.Second)
		for {
			mu.Lock()
			n := len(places[i])
			mu.Unlock()
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d was never told its place", i+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(served, []int{0, 1, 2}) {
		t.Fatalf("served in order %v, want [0 1 2]", served)
	}
	moved := false
	for i, got := range places {
		ok := len(got) > 0 && got[0] == i+1 && got[len(got)-1] >= 1
		for j := 1; ok && j < len(got); j++ {
			ok = got[j] < got[j-1]
		}
		if !ok {
			t.Errorf("waiter %d was told places %v, want %d first, then fewer down to no less than 1", i+1, got, i+1)
		}
		moved = moved || len(got) > 1
	}
	if !moved {
		t.Errorf("no waiter was told it moved up: places %v", places)
	}
}
