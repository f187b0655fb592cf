package fallback_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/memory"
)

var errDown = errors.New("store down")

// flaky is a memory store whose every call fails while down is set, as a
// dead server's would.
type flaky struct {
	*memory.Backend
	down atomic.Bool
}

func newFlaky() *flaky { return &flaky{Backend: memory.New()} }

func (f *flaky) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if f.down.Load() {
		return 0, false, errDown
	}
	return f.Backend.Acquire(ctx, key, owner, ttl)
}

func (f *flaky) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if f.down.Load() {
		return false, errDown
	}
	return f.Backend.Extend(ctx, key, owner, ttl)
}

func (f *flaky) Release(ctx context.Context, key, owner string) (bool, error) {
	if f.down.Load() {
		return false, errDown
	}
	return f.Backend.Release(ctx, key, owner)
}

// transitions records the breaker's state changes.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (r *transitions) record(from, to fallback.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, from.String()+"->"+to.String())
}

func (r *transitions) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

const (
	unitGrace   = 150 * time.Millisecond
	unitOpen    = 300 * time.Millisecond
	unitTTL     = 100 * time.Millisecond
	unitTripAft = 3
)

func newPair(t *testing.T, rec *transitions) (*fallback.Backend, *flaky, *flaky) {
	t.Helper()
	p, s := newFlaky(), newFlaky()
	opts := []fallback.Option{
		fallback.WithTripAfter(unitTripAft), fallback.WithOpenTimeout(unitOpen), fallback.WithGrace(unitGrace),
	}
	if rec != nil {
		opts = append(opts, fallback.WithOnStateChange(rec.record))
	}
	b, err := fallback.New(p, s, opts...)
	if err != nil {
		t.Fatalf("fallback.New: %v", err)
	}
	return b, p, s
}

// TestBreakerTransitions walks the breaker through closed → open →
// half-open → closed and checks where acquisitions go at each step.
func TestBreakerTransitions(t *testing.T) {
	rec := &transitions{}
	b, p, s := newPair(t, rec)
	ctx := ctxFor(t, 10*time.Second)

	if _, ok, err := b.Acquire(ctx, "held", "a", unitTTL); !ok || err != nil {
		t.Fatalf("Acquire on healthy primary = %v, %v", ok, err)
	}
	if owner, _, _, ok := p.Holder("held"); !ok || owner != "a" {
		t.Fatal("healthy primary does not hold the lock")
	}

	p.down.Store(true)
	for i := range unitTripAft - 1 {
		if _, _, err := b.Acquire(ctx, "k", "b", unitTTL); !errors.Is(err, errDown) {
			t.Fatalf("Acquire %d on dead primary: err = %v, want errDown", i, err)
		}
	}
	// The failure that opens the breaker starts the switch: that call
	// answers "not acquired", as every call does during the grace.
	if _, ok, err := b.Acquire(ctx, "k", "b", unitTTL); ok || err != nil {
		t.Fatalf("Acquire that opens the breaker = %v, %v; want false, nil", ok, err)
	}
	if got := b.State(); got != fallback.StateOpen {
		t.Fatalf("State after %d failures = %v, want open", unitTripAft, got)
	}
	tripped := time.Now()

	// The lease granted by the primary cannot be renewed after the switch.
	if ok, err := b.Extend(ctx, "held", "a", unitTTL); ok || err != nil {
		t.Fatalf("Extend of a primary lease after the switch = %v, %v; want false, nil", ok, err)
	}
	// Nor released there while the breaker holds the primary down.
	if _, err := b.Release(ctx, "held", "a"); !errors.Is(err, fallback.ErrPrimaryDown) {
		t.Fatalf("Release of a primary lease on an open breaker: err = %v, want ErrPrimaryDown", err)
	}
	// During grace the secondary grants nothing.
	if _, ok, err := b.Acquire(ctx, "held", "c", unitTTL); ok || err != nil {
		t.Fatalf("Acquire during grace = %v, %v; want false, nil", ok, err)
	}
	if _, inGrace := b.Serving(); !inGrace {
		t.Fatal("Serving reports no grace right after the switch")
	}
	// After grace the secondary serves, even while half-open probes fail.
	waitUntil(t, tripped.Add(unitGrace))
	if _, ok, err := b.Acquire(ctx, "held", "c", unitTTL); !ok || err != nil {
		t.Fatalf("Acquire after grace = %v, %v; want the secondary to grant", ok, err)
	}
	if owner, _, _, ok := s.Holder("held"); !ok || owner != "c" {
		t.Fatal("the secondary does not hold the lock it granted")
	}
	// Extend and Release go to the granting store.
	if ok, err := b.Extend(ctx, "held", "c", unitTTL); !ok || err != nil {
		t.Fatalf("Extend of a secondary lease = %v, %v", ok, err)
	}
	if ok, err := b.Release(ctx, "held", "c"); !ok || err != nil {
		t.Fatalf("Release of a secondary lease = %v, %v", ok, err)
	}

	// The primary recovers: the next acquisition after the open timeout
	// probes it, the breaker closes, and the primary waits out its grace.
	p.down.Store(false)
	waitUntil(t, tripped.Add(unitOpen))
	if got := b.State(); got != fallback.StateHalfOpen {
		t.Fatalf("State after the open timeout = %v, want half-open", got)
	}
	if _, ok, err := b.Acquire(ctx, "k2", "d", unitTTL); ok || err != nil {
		t.Fatalf("Acquire that probes = %v, %v; want false, nil (grace of the switch back)", ok, err)
	}
	closed := time.Now()
	if got := b.State(); got != fallback.StateClosed {
		t.Fatalf("State after a good probe = %v, want closed", got)
	}
	if _, _, _, ok := p.Holder("k2"); ok {
		t.Fatal("the probe left its lock in the primary")
	}
	waitUntil(t, closed.Add(unitGrace))
	if _, ok, err := b.Acquire(ctx, "k2", "d", unitTTL); !ok || err != nil {
		t.Fatalf("Acquire after the switch back = %v, %v", ok, err)
	}
	if _, _, _, ok := p.Holder("k2"); !ok {
		t.Fatal("the primary does not serve acquisitions after it recovered")
	}

	want := []string{"closed->open", "open->half-open", "half-open->closed"}
	if got := rec.list(); !equal(got, want) {
		t.Fatalf("transitions = %v, want %v", got, want)
	}
}

// TestNotAcquiredIsSuccess: answers from a healthy store never trip the
// breaker, however many.
func TestNotAcquiredIsSuccess(t *testing.T) {
	b, _, _ := newPair(t, nil)
	ctx := ctxFor(t, 5*time.Second)
	if _, ok, err := b.Acquire(ctx, "k", "a", time.Second/10); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	for range 3 * unitTripAft {
		if _, ok, err := b.Acquire(ctx, "k", "b", unitTTL); ok || err != nil {
			t.Fatalf("contended Acquire = %v, %v; want false, nil", ok, err)
		}
		if ok, err := b.Extend(ctx, "k", "b", unitTTL); ok || err != nil {
			t.Fatalf("non-owner Extend = %v, %v; want false, nil", ok, err)
		}
	}
	if got := b.State(); got != fallback.StateClosed {
		t.Fatalf("State = %v, want closed", got)
	}
}

// TestCallerCancelIsNotAFailure: errors that come with the caller's own
// context ending say nothing about the store.
func TestCallerCancelIsNotAFailure(t *testing.T) {
	p := &slow{Backend: memory.New()}
	b, err := fallback.New(p, memory.New(), fallback.WithTripAfter(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, _, err := b.Acquire(ctx, "k", "a", time.Second)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with an expiring context: err = %v", err)
		}
	}
	if got := b.State(); got != fallback.StateClosed {
		t.Fatalf("State = %v, want closed", got)
	}
}

// slow answers only when the caller's context ends.
type slow struct{ *memory.Backend }

func (s *slow) Acquire(ctx context.Context, _, _ string, _ time.Duration) (uint64, bool, error) {
	<-ctx.Done()
	return 0, false, ctx.Err()
}

func TestOptionsAndTTL(t *testing.T) {
	m1, m2 := memory.New(), memory.New()
	bad := []struct {
		name string
		opt  fallback.Option
	}{
		{"trip 0", fallback.WithTripAfter(0)},
		{"open 0", fallback.WithOpenTimeout(0)},
		{"grace 0", fallback.WithGrace(0)},
		{"nil logger", fallback.WithLogger(nil)},
		{"nil callback", fallback.WithOnStateChange(nil)},
		{"nil option", nil},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			if _, err := fallback.New(m1, m2, c.opt); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("err = %v, want ErrInvalidOption", err)
			}
		})
	}
	if _, err := fallback.New(m1, m1); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("same store twice: err = %v", err)
	}
	if _, err := fallback.New(nil, m2); !errors.Is(err, turnstile.ErrNilBackend) {
		t.Fatalf("nil primary: err = %v", err)
	}
	b, err := fallback.New(m1, m2, fallback.WithGrace(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Acquire(context.Background(), "k", "a", 2*time.Second); !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Fatalf("TTL above grace: err = %v, want ErrInvalidTTL", err)
	}
	if got, want := b.Name(), "fallback(memory, memory)"; got != want {
		t.Fatalf("Name = %q, want %q", got, want)
	}
}

// TestReleaseUnknownGoesToBoth: a lease this Backend did not grant is
// released wherever it is.
func TestReleaseUnknownGoesToBoth(t *testing.T) {
	p, s := memory.New(), memory.New()
	b, err := fallback.New(p, s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 5*time.Second)
	if _, ok, _ := s.Acquire(ctx, "k", "a", time.Second); !ok {
		t.Fatal("setup")
	}
	if ok, err := b.Release(ctx, "k", "a"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if _, _, _, ok := s.Holder("k"); ok {
		t.Fatal("the secondary still holds the lock")
	}
}

var _ driver.Backend = (*flaky)(nil)

func waitUntil(t *testing.T, when time.Time) {
	t.Helper()
	time.Sleep(time.Until(when) + 5*time.Millisecond)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLeasesForgotten: the per-lease memory does not outlive releases.
func TestLeasesForgotten(t *testing.T) {
	b, _, _ := newPair(t, nil)
	ctx := ctxFor(t, 5*time.Second)
	for i := range 100 {
		key := "k" + string(rune('a'+i%26)) + time.Now().String()
		if _, ok, err := b.Acquire(ctx, key, "a", unitTTL); !ok || err != nil {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		if ok, err := b.Release(ctx, key, "a"); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	}
	if n := b.LeaseCount(); n != 0 {
		t.Fatalf("%d leases remembered after every release", n)
	}
}
