package locktest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// testMultiKey: 32 clients over 4 backends take random sets of 2 to 4
// of 8 shared keys with AcquireAll (at most 4 sets can be held at once,
// so most clients wait at any moment). Every set is held whole (no key of it
// is held by anyone else meanwhile), every caller gets its keys in the
// end (no deadlock), and a set that cannot be completed leaves none of
// its keys behind.
func testMultiKey(t *testing.T, h *Harness) {
	const clients, rounds, nkeys = 32, 3, 8
	base := key(t)
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", base, i)
	}
	ctx := ctxFor(t, 2*time.Minute)
	backends := make([]*turnstile.Client, 0, clients)
	var shared [4]driver.Backend
	for i := range shared {
		shared[i] = h.backend(t)
	}
	for i := range clients {
		c, err := turnstile.New(shared[i%len(shared)], patient, turnstile.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		backends = append(backends, c)
	}
	var (
		holders [nkeys]atomic.Int32
		overlap atomic.Int32
		taken   atomic.Int32
		workers []func() error
	)
	for _, c := range backends {
		workers = append(workers, func() error {
			set := rand.Perm(nkeys)[:2+rand.IntN(3)]
			names := make([]string, len(set))
			for i, k := range set {
				names[i] = keys[k]
			}
			m, err := c.AcquireAll(ctx, names)
			if err != nil {
				return err
			}
			for _, k := range set {
				if holders[k].Add(1) != 1 {
					overlap.Add(1)
				}
			}
			time.Sleep(100 * time.Microsecond)
			for _, k := range set {
				holders[k].Add(-1)
			}
			var wrong error
			if len(m.Keys()) != len(set) || m.Token(names[0]) == 0 {
				wrong = fmt.Errorf("lease covers %v, want %d keys with tokens", m.Keys(), len(set))
			}
			if err := m.Release(ctx); err != nil {
				return err
			}
			if wrong != nil {
				return wrong
			}
			taken.Add(1)
			return nil
		})
	}
	inTurn(t, rounds, workers)
	if n := overlap.Load(); n > 0 {
		t.Fatalf("%d times a key of a held set was held by another set", n)
	}
	if n := taken.Load(); n != clients*rounds {
		t.Fatalf("%d sets taken, want %d", n, clients*rounds)
	}

	// All or nothing: a set whose last key is held elsewhere fails and
	// leaves its other keys free.
	c := backends[0]
	blocker, err := backends[1].TryAcquire(ctx, keys[nkeys-1])
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AcquireAll(ctx, keys, turnstile.WithBackoff(turnstile.NoRetry()))
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("AcquireAll with a held key = %v, want ErrNotAcquired", err)
	}
	for _, k := range keys[:nkeys-1] {
		l, err := backends[2].TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("key %s left held after a failed AcquireAll: %v", k, err)
		}
		_ = l.Release(ctx)
	}
	_ = blocker.Release(ctx)
	if _, err := c.AcquireAll(ctx, []string{keys[0], keys[0]}); !errors.Is(err, turnstile.ErrInvalidKey) {
		t.Fatalf("duplicate keys = %v, want ErrInvalidKey", err)
	}
}
