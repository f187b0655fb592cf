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

// TestCancelledAcquireLeavesNoLock: workers taking and releasing locks
// are stopped by cancelling their context at a moment of no particular
// kind, many times over; once the Client is closed no lock is held. An
// acquisition cancelled while its script is on its way still runs on the
// server; the release that cleans up after it must not overtake it on
// another of the client's connections.
func TestCancelledAcquireLeavesNoLock(t *testing.T) {
	srv := testserver.StartRedis(t)
	const rounds = 40
	var held []string
	for round := range rounds {
		c, err := turnstile.Open(context.Background(), srv.URL(), turnstile.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					l, err := c.Acquire(ctx, "r"+strconv.Itoa(round)+":"+strconv.Itoa(w)+":"+strconv.Itoa(i))
					if err != nil {
						continue
					}
					if err := l.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		time.Sleep(time.Duration(5+round%20) * time.Millisecond)
		cancel()
		wg.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// Every lock key, fences aside, still in the server.
		locks, err := srv.Do("EVAL", `local n = {} for _, k in ipairs(redis.call('KEYS', '*')) do if not string.find(k, ':fence$') then n[#n+1] = k end end redis.call('FLUSHALL') return table.concat(n, ' ')`, "0")
		if err != nil {
			t.Fatal(err)
		}
		if locks != "" {
			held = append(held, "round "+strconv.Itoa(round)+": "+locks)
		}
	}
	if len(held) > 0 {
		t.Errorf("cancelled acquisitions left locks held in %d of %d rounds:\n%v", len(held), rounds, held)
	}
}
