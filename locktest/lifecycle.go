package locktest

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// testCrashedHolderExpires kills a holder without letting it release: with
// SIGKILL in a child process when the store is shared, by abandoning the
// lock in-process otherwise. The lock must stay held until its TTL runs
// out, then be free, with a larger token for the next holder.
func testCrashedHolderExpires(t *testing.T, h *Harness) {
	ttl := 3 * h.ttl()
	if h.URL != "" {
		ttl = max(ttl, time.Second)
	}
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	var crashedToken uint64
	if h.URL != "" {
		cmd, tok := holdInChild(t, h, k, ttl)
		crashedToken = tok
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill holder: %v", err)
		}
		_ = cmd.Wait()
	} else {
		tok, ok, err := h.backend(t).Acquire(ctx, k, "crashed-owner", ttl)
		if err != nil || !ok {
			t.Fatalf("acquire for the crashed holder: ok=%v err=%v", ok, err)
		}
		crashedToken = tok // and never released or renewed: the holder "died"
	}
	killed := time.Now()
	c := h.client(t)
	if l, err := c.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("right after the crash the lock must still be held until its TTL; TryAcquire = %v", err)
	}
	var l *turnstile.Lease
	for {
		var err error
		l, err = c.TryAcquire(ctx, k)
		if err == nil {
			break
		}
		if !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("TryAcquire: %v", err)
		}
		if time.Since(killed) > ttl+10*time.Second {
			t.Fatalf("lock of a crashed holder still held %v after the crash (ttl %v)", time.Since(killed), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer l.Release(ctx)
	if l.Token() <= crashedToken {
		t.Fatalf("token after expiry %d is not greater than the crashed holder's %d", l.Token(), crashedToken)
	}
}

// testNonOwnerRefused: A's lock expires, B takes it; A's Release and
// Extend must be refused and must not disturb B.
func testNonOwnerRefused(t *testing.T, h *Harness) {
	ttl := h.ttl()
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	a, b := h.client(t), h.client(t)
	la, err := a.TryAcquire(ctx, k, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatalf("A acquire: %v", err)
	}
	<-la.Context().Done()
	if !errors.Is(context.Cause(la.Context()), turnstile.ErrLockLost) {
		t.Fatalf("A's context cause = %v, want ErrLockLost", context.Cause(la.Context()))
	}
	lb := acquireWithin(t, b, k, 10*ttl+5*time.Second, turnstile.WithTTL(10*time.Second))
	defer lb.Release(ctx)

	if err := la.Extend(ctx, ttl); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Fatalf("A.Extend after B took the lock = %v, want ErrNotHeld", err)
	}
	if err := la.Release(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Fatalf("A.Release after B took the lock = %v, want ErrNotHeld", err)
	}
	be := h.backend(t)
	if ok, err := be.Release(ctx, k, la.Owner()); ok || err != nil {
		t.Fatalf("backend Release by a non-owner = %v, %v; want false, nil", ok, err)
	}
	if ok, err := be.Extend(ctx, k, "someone-else", time.Minute); ok || err != nil {
		t.Fatalf("backend Extend by a non-owner = %v, %v; want false, nil", ok, err)
	}
	if _, err := h.client(t).TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("B must still hold the lock after A's refused release; TryAcquire = %v", err)
	}
	if err := lb.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("B.Extend = %v", err)
	}
	if lb.Context().Err() != nil {
		t.Fatalf("B's lease ended: %v", context.Cause(lb.Context()))
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatalf("B.Release = %v", err)
	}
}

// testSameOwnerRetry: a backend Acquire repeated by the same owner (a
// retry after a lost reply) succeeds again with a new, larger token, and
// another owner is still refused.
func testSameOwnerRetry(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	be := h.backend(t)
	t1, ok, err := be.Acquire(ctx, k, "owner-1", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	t2, ok, err := be.Acquire(ctx, k, "owner-1", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("repeated acquire by the same owner: ok=%v err=%v", ok, err)
	}
	if t2 <= t1 {
		t.Fatalf("repeated acquire token %d not greater than %d", t2, t1)
	}
	if _, ok, err := be.Acquire(ctx, k, "owner-2", 10*time.Second); ok || err != nil {
		t.Fatalf("acquire by another owner = %v, %v; want false, nil", ok, err)
	}
	if ok, err := be.Release(ctx, k, "owner-1"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	if ok, err := be.Release(ctx, k, "owner-1"); ok || err != nil {
		t.Fatalf("second release = %v, %v; want false, nil", ok, err)
	}
}

// testTokensIncrease takes and releases one key 10,000 times.
func testTokensIncrease(t *testing.T, h *Harness) {
	const n = 10000
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	c := h.client(t)
	var last uint64
	for i := range n {
		l, err := c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d not greater than %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// testTokensIncreaseConcurrent: holders that follow each other through
// contention, on several clients, see increasing tokens.
func testTokensIncreaseConcurrent(t *testing.T, h *Harness) {
	tokensInOrder(t, key(t), 8, 25, func() *turnstile.Client { return h.client(t, patient) })
}

// tokensInOrder runs workers goroutines, each with the Client client
// gives it, that take and release key rounds times, and checks that the
// tokens strictly increase in the order of the critical sections. It
// returns them in that order.
func tokensInOrder(t *testing.T, k string, workers, rounds int, client func() *turnstile.Client) []uint64 {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	var (
		mu       sync.Mutex // guards order; taken only inside the critical section
		order    []uint64
		rounders []func() error
	)
	for range workers {
		c := client()
		rounders = append(rounders, func() error {
			l, err := c.Acquire(ctx, k)
			if err != nil {
				return err
			}
			mu.Lock()
			order = append(order, l.Token())
			mu.Unlock()
			return l.Release(ctx)
		})
	}
	inTurn(t, rounds, rounders)
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("holder %d got token %d after holder %d's %d", i, order[i], i-1, order[i-1])
		}
	}
	return order
}

// testTokensIncreaseInOneClient: holders of one Client that follow each
// other — handed the lock within the Client, without the store, where
// the backend leaves room between its tokens (driver.TokenRoom) — see
// increasing tokens; and a holder of another Client after them sees a
// larger one still, whether the last of them released the lock or its
// Client closed and the lock expired.
func testTokensIncreaseInOneClient(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	c := h.client(t, patient)
	order := tokensInOrder(t, k, 8, 40, func() *turnstile.Client { return c })
	last := order[len(order)-1]
	other := h.client(t, patient)
	l, err := other.Acquire(ctx, k)
	if err != nil {
		t.Fatalf("acquire in another client: %v", err)
	}
	if l.Token() <= last {
		t.Fatalf("another client's token %d is not above the last handed-over %d", l.Token(), last)
	}
	last = l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A waiter that takes the lock from a lease of its own Client, whose
	// process then dies holding it: the lock expires, and the next
	// holder's token is above the dead one's.
	ttl := h.ttl()
	waiting := make(chan struct{}, 1)
	dying, err := turnstile.New(h.backend(t), patient, turnstile.WithTTL(ttl),
		turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
			if e.Type == turnstile.EventWaiting {
				select {
				case waiting <- struct{}{}:
				default:
				}
			}
		})))
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	first, err := dying.Acquire(ctx, k)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	next := make(chan *turnstile.Lease, 1)
	go func() {
		l, err := dying.Acquire(ctx, k)
		if err != nil {
			t.Errorf("second acquire in one client: %v", err)
		}
		next <- l
	}()
	<-waiting
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-next
	if second == nil {
		_ = dying.Close()
		return
	}
	dead := second.Token()
	if dead <= first.Token() || first.Token() <= last {
		t.Fatalf("tokens %d then %d in one client after %d", first.Token(), dead, last)
	}
	_ = dying.Close() // the lock stays held in the store until its TTL ends
	l = acquireWithin(t, other, k, ttl+30*time.Second)
	defer l.Release(ctx)
	if l.Token() <= dead {
		t.Fatalf("token %d after the dead holder's lock expired is not above its %d", l.Token(), dead)
	}
}

// acquireWithin retries TryAcquire until it succeeds or d passes.
func acquireWithin(t *testing.T, c *turnstile.Client, k string, d time.Duration, opts ...turnstile.Option) *turnstile.Lease {
	t.Helper()
	ctx := ctxFor(t, d)
	l, err := c.Acquire(ctx, k, append(opts, turnstile.WithBackoff(turnstile.Exponential{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1}))...)
	if err != nil {
		t.Fatalf("acquire %q within %v: %v", k, d, err)
	}
	return l
}
