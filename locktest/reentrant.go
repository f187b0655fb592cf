package locktest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// RunReentrant runs the cases of a reentrant lock: h.New returns the
// store's reentrant view, on which one owner (turnstile.WithOwner) takes
// a lock again while it holds it.
func RunReentrant(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("locktest: Harness.New is nil")
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *Harness)
	}{
		{"ReentrancyCount", testReentrancyCount},
		{"MutualExclusionWithReentry", testReentrantExclusion},
		{"TokensIncrease", testReentrantTokens},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, &h) })
	}
}

// testReentrancyCount: one owner takes the lock three times without
// waiting, with one token; after two releases it still holds it and
// nobody else gets it; the third frees it.
func testReentrancyCount(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	owner := turnstile.WithOwner("locktest-owner-A")
	c := h.client(t, owner)
	var ls []*turnstile.Lease
	for i := range 3 {
		l, err := c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("acquisition %d by the holding owner: %v", i+1, err)
		}
		if len(ls) > 0 && l.Token() != ls[0].Token() {
			t.Fatalf("re-entry %d got token %d, want the first acquisition's %d", i, l.Token(), ls[0].Token())
		}
		ls = append(ls, l)
	}
	// Through Acquire too: a holder must not wait for itself.
	l4, err := c.Acquire(ctx, k, turnstile.WithBackoff(turnstile.NoRetry()))
	if err != nil {
		t.Fatalf("Acquire by the holding owner: %v", err)
	}
	if err := l4.Release(ctx); err != nil {
		t.Fatalf("release of the fourth acquisition: %v", err)
	}

	others := []*turnstile.Client{h.client(t), h.client(t, turnstile.WithOwner("locktest-owner-B"))}
	for i := range 2 {
		if err := ls[i].Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
		for j, o := range others {
			if l, err := o.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
				if l != nil {
					_ = l.Release(ctx)
				}
				t.Fatalf("after %d of 3 releases another owner (%d) took the lock: %v", i+1, j, err)
			}
		}
	}
	if ls[2].Context().Err() != nil {
		t.Fatalf("the remaining lease ended: %v", ls[2].Context().Err())
	}
	if err := ls[2].Release(ctx); err != nil {
		t.Fatalf("third release: %v", err)
	}
	l, err := others[1].TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("after the third release another owner cannot take the lock: %v", err)
	}
	if l.Token() <= ls[0].Token() {
		t.Fatalf("next holder's token %d is not greater than %d", l.Token(), ls[0].Token())
	}
	be := h.backend(t)
	if ok, err := be.Release(ctx, k, "locktest-owner-A"); ok || err != nil {
		t.Fatalf("release by the former holder = %v, %v; want false, nil", ok, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testReentrantExclusion runs the read-modify-write under the lock from
// 32 goroutines over 4 clients, each goroutine its own owner, each taking
// the lock once more inside its critical section.
func testReentrantExclusion(t *testing.T, h *Harness) {
	const clients, perClient, rounds = 4, 8, 6
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	var (
		counter atomic.Int64
		inside  atomic.Int32
		overlap atomic.Int32
		mu      sync.Mutex // guards order; taken inside the critical section only
		order   []uint64
		workers []func() error
	)
	for ci := range clients {
		base := h.client(t, patient, turnstile.WithTTL(10*time.Second))
		for g := range perClient {
			own := turnstile.WithOwner(fmt.Sprintf("locktest-%d-%d", ci, g))
			workers = append(workers, func() error {
				l, err := base.Acquire(ctx, k, own)
				if err != nil {
					return err
				}
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				inner, err := base.TryAcquire(ctx, k, own)
				if err != nil {
					return fmt.Errorf("re-entry inside the critical section: %w", err)
				}
				if inner.Token() != l.Token() {
					return fmt.Errorf("re-entry token %d, want %d", inner.Token(), l.Token())
				}
				v := counter.Load()
				runtime.Gosched()
				counter.Store(v + 1)
				mu.Lock()
				order = append(order, l.Token())
				mu.Unlock()
				if err := inner.Release(ctx); err != nil {
					return err
				}
				inside.Add(-1)
				return l.Release(ctx)
			})
		}
	}
	inTurn(t, rounds, workers)
	if n := overlap.Load(); n > 0 {
		t.Fatalf("%d critical sections overlapped", n)
	}
	if got, want := counter.Load(), int64(clients*perClient*rounds); got != want {
		t.Fatalf("counter = %d after %d locked increments: updates were lost", got, want)
	}
	checkIncreasing(t, "holder", order)
}

// testReentrantTokens: holders one after another get increasing tokens.
func testReentrantTokens(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	c := h.client(t)
	checkTokensIncrease(t, ctx, k, 500, func(int) *turnstile.Client { return c })
}
