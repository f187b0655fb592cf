package locktest

import (
	"errors"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// RunSemaphore runs the cases of a semaphore: h.New returns a backend on
// which up to permits owners hold a key at once. h.Plain returns the
// plain backend of the same store, a driver.Semaphorer: the stored-count
// case takes its views with 2 and 3 permits through turnstile.Semaphore.
func RunSemaphore(t *testing.T, h Harness, permits int) {
	if h.New == nil {
		t.Fatal("locktest: Harness.New is nil")
	}
	if permits < 1 || permits > 16 {
		t.Fatalf("locktest: RunSemaphore wants 1 to 16 permits, got %d", permits)
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *Harness, int)
	}{
		{"PermitsCounted", testPermitsCounted},
		{"NeverAboveN", testNeverAboveN},
		{"PermitExpires", testPermitExpires},
		{"StoredPermits", testStoredPermits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, &h, permits) })
	}
}

// semClient returns a Client over a fresh instance. A semaphore is
// driver.Shared, so the waiters of one Client take free permits together.
func semClient(t *testing.T, h *Harness, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	return kindClient(t, h.backend(t), opts...)
}

// testPermitsCounted: n owners get permits, the next is refused; each
// freed permit lets one more in; tokens increase.
func testPermitsCounted(t *testing.T, h *Harness, n int) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	c := semClient(t, h)
	var held []*turnstile.Lease
	var tokens []uint64
	for i := range n {
		l, err := c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("permit %d of %d: %v", i+1, n, err)
		}
		held = append(held, l)
		tokens = append(tokens, l.Token())
	}
	for round := range 3 {
		if l, err := c.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("permit %d of %d: %v, want ErrNotAcquired", n+1, n, err)
		}
		if err := held[round%n].Release(ctx); err != nil {
			t.Fatal(err)
		}
		be := h.backend(t)
		if ok, err := be.Release(ctx, k, held[round%n].Owner()); ok || err != nil {
			t.Fatalf("second release of one permit = %v, %v; want false, nil", ok, err)
		}
		l, err := c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("permit after one was returned: %v", err)
		}
		held[round%n] = l
		tokens = append(tokens, l.Token())
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkIncreasing(t, "permit", tokens)
}

// testNeverAboveN: 64 goroutines over 4 instances take permits in turn;
// an in-memory counter of holders never exceeds n, and every permit's
// token is distinct.
func testNeverAboveN(t *testing.T, h *Harness, n int) {
	const clients, perClient, rounds = 4, 16, 5
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	var (
		inside, most atomic.Int32
		mu           sync.Mutex
		seen         = map[uint64]bool{}
		dup          atomic.Int32
		workers      []func() error
	)
	for range clients {
		c := semClient(t, h, patient, turnstile.WithTTL(10*time.Second))
		for range perClient {
			workers = append(workers, func() error {
				l, err := c.Acquire(ctx, k)
				if err != nil {
					return err
				}
				v := inside.Add(1)
				for m := most.Load(); v > m && !most.CompareAndSwap(m, v); m = most.Load() {
				}
				mu.Lock()
				if seen[l.Token()] {
					dup.Add(1)
				}
				seen[l.Token()] = true
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				return l.Release(ctx)
			})
		}
	}
	inTurn(t, rounds, workers)
	if m := most.Load(); m > int32(n) {
		t.Fatalf("%d holders at once with %d permits", m, n)
	}
	if d := dup.Load(); d > 0 {
		t.Fatalf("%d permits got a token another permit had", d)
	}
	t.Logf("at most %d of %d permits held at once", most.Load(), n)
}

// testPermitExpires: permits of holders that stopped renewing come back
// after their TTL, with larger tokens.
func testPermitExpires(t *testing.T, h *Harness, n int) {
	ttl := h.ttl()
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	be := h.backend(t)
	var last uint64
	for i := range n {
		tok, ok, err := be.Acquire(ctx, k, "locktest-crashed-"+string(rune('a'+i)), ttl)
		if err != nil || !ok {
			t.Fatalf("permit %d: ok=%v err=%v", i, ok, err)
		}
		last = max(last, tok)
	}
	c := semClient(t, h)
	if _, err := c.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("permit while all %d are held: %v, want ErrNotAcquired", n, err)
	}
	l := acquireWithin(t, c, k, 10*ttl+5*time.Second)
	defer l.Release(ctx)
	if l.Token() <= last {
		t.Fatalf("token %d after expiry is not greater than %d", l.Token(), last)
	}
}

// testStoredPermits: the number of permits is stored with the holders.
// Views of one store with 2 and 3 permits: while the first holds a
// permit, the second's acquisition is refused with ErrInvalidOption
// naming both numbers; after the release, the second's number holds, and
// the first is refused in turn.
func testStoredPermits(t *testing.T, h *Harness, _ int) {
	if h.Plain == nil {
		t.Fatal("locktest: RunSemaphore needs Harness.Plain, the plain backend whose semaphore views (2 and 3 permits) the stored-count case takes")
	}
	view := func(permits int) driver.Backend {
		t.Helper()
		p := h.Plain(t)
		s, err := turnstile.Semaphore(p, permits)
		if err != nil {
			t.Fatalf("turnstile.Semaphore(%s, %d): %v", driver.Name(p), permits, err)
		}
		return s
	}
	two, three := view(2), view(3)
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	ttl := 10 * time.Second
	refused := func(b driver.Backend, owner string, held, asked int) {
		t.Helper()
		tok, ok, err := b.Acquire(ctx, k, owner, ttl)
		if ok {
			_, _ = b.Release(ctx, k, owner)
			t.Fatalf("a view with %d permits took a permit (token %d) while the key's are held with %d", asked, tok, held)
		}
		if !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("a view with %d permits while the key's are held with %d: %v, want ErrInvalidOption", asked, held, err)
		}
		for _, n := range []int{held, asked} {
			if !regexp.MustCompile(`\b` + strconv.Itoa(n) + `\b`).MatchString(err.Error()) {
				t.Fatalf("the refusal %q does not name %d", err, n)
			}
		}
	}
	take := func(b driver.Backend, owner string) {
		t.Helper()
		if _, ok, err := b.Acquire(ctx, k, owner, ttl); !ok || err != nil {
			t.Fatalf("permit for %s: ok=%v err=%v", owner, ok, err)
		}
	}
	give := func(b driver.Backend, owner string) {
		t.Helper()
		if ok, err := b.Release(ctx, k, owner); !ok || err != nil {
			t.Fatalf("release by %s: ok=%v err=%v", owner, ok, err)
		}
	}

	take(two, "locktest-two-a")
	refused(three, "locktest-three-a", 2, 3)
	// Through a Client the refusal is an error too, not ErrNotAcquired.
	c := kindClient(t, three)
	if l, err := c.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrInvalidOption) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("TryAcquire through the view with 3 permits: %v, want ErrInvalidOption", err)
	}
	give(two, "locktest-two-a")

	// No permit is held: the next acquisition's number holds.
	for _, o := range []string{"locktest-three-a", "locktest-three-b", "locktest-three-c"} {
		take(three, o)
	}
	if _, ok, err := three.Acquire(ctx, k, "locktest-three-d", ttl); ok || err != nil {
		t.Fatalf("a fourth permit of 3: ok=%v err=%v, want refused", ok, err)
	}
	refused(two, "locktest-two-b", 3, 2)
	for _, o := range []string{"locktest-three-a", "locktest-three-b", "locktest-three-c"} {
		give(three, o)
	}
}
