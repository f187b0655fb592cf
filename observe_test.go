package turnstile_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// recorder keeps every event it observes.
type recorder struct {
	mu     sync.Mutex
	events []turnstile.Event
}

func (r *recorder) Observe(e turnstile.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) types(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Key == key {
			out = append(out, e.Type.String())
		}
	}
	return out
}

func (r *recorder) last(key string, t turnstile.EventType) (turnstile.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if e := r.events[i]; e.Key == key && e.Type == t {
			return e, true
		}
	}
	return turnstile.Event{}, false
}

// waitFor polls until key's events are want.
func (r *recorder) waitFor(t *testing.T, key string, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(r.types(key), want) {
		if time.Now().After(deadline) {
			t.Fatalf("events of %s: got %v, want %v", key, r.types(key), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestObserverSeesTheLifeOfALease(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	rec := &recorder{}
	c := newClient(t, b, turnstile.WithObserver(rec), turnstile.WithTTL(300*time.Millisecond))

	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := rec.last("k", turnstile.EventAcquired)
	if e.Token != l.Token() || e.Owner != l.Owner() || e.Backend != "memory" || e.Validity <= 0 || e.Validity > 300*time.Millisecond || e.Waited || e.Time.IsZero() {
		t.Fatalf("acquired event %+v does not describe lease %d/%s", e, l.Token(), l.Owner())
	}

	// A second owner waits, gives up, and says so.
	_, err = c.Acquire(ctx, "k", turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: time.Millisecond, MaxRetries: 3}))
	if !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("second acquire: %v", err)
	}
	f, _ := rec.last("k", turnstile.EventFailed)
	if !f.Waited || f.Retries != 3 || !errors.Is(f.Err, turnstile.ErrNotAcquired) || f.Wait <= 0 {
		t.Fatalf("failed event %+v", f)
	}

	if err := l.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The watchdog renews every 100 ms.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if e, ok := rec.last("k", turnstile.EventExtended); ok && e.Renewal {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no watchdog renewal observed: %v", rec.types("k"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := rec.types("k")
	want := []string{"ACQUIRED", "WAITING", "FAILED", "EXTENDED"}
	if !slices.Equal(got[:4], want) || got[len(got)-1] != "RELEASED" {
		t.Fatalf("events %v, want %v, renewals, RELEASED", got, want)
	}
	if r, _ := rec.last("k", turnstile.EventReleased); r.Err != nil || r.Refused || r.Token != l.Token() {
		t.Fatalf("released event %+v", r)
	}
	// Releasing twice is refused and not reported again as a release.
	_ = l.Release(ctx)
	if n := len(rec.types("k")); n != len(got) {
		t.Fatalf("second release reported: %v", rec.types("k"))
	}
}

func TestObserverSeesLossAndClose(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	rec := &recorder{}
	c, err := turnstile.New(b, turnstile.WithObserver(rec), turnstile.WithTTL(turnstile.MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	l, err := c.Acquire(ctx, "evicted")
	if err != nil {
		t.Fatal(err)
	}
	b.Evict("evicted")
	<-l.Context().Done()
	rec.waitFor(t, "evicted", []string{"ACQUIRED", "LOST"})
	lost, _ := rec.last("evicted", turnstile.EventLost)
	if !lost.Refused || !lost.Renewal || !errors.Is(lost.Err, turnstile.ErrLockLost) {
		t.Fatalf("lost event %+v", lost)
	}

	// Per-call observers see only their call; the Client's see everything.
	own := &recorder{}
	held, err := c.Acquire(ctx, "closed", turnstile.WithObserver(own))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-held.Context().Done()
	own.waitFor(t, "closed", []string{"ACQUIRED", "LOST"})
	if got := own.types("other"); len(got) != 0 {
		t.Fatalf("per-call observer saw another call: %v", got)
	}
	rec.waitFor(t, "other", []string{"ACQUIRED", "LOST"})
	if e, _ := rec.last("closed", turnstile.EventLost); !errors.Is(e.Err, turnstile.ErrClosed) || e.Refused {
		t.Fatalf("close event %+v", e)
	}
}

func TestObserverOptionRefusesNil(t *testing.T) {
	if _, err := turnstile.New(memory.New(), turnstile.WithObserver(nil)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("nil observer: %v", err)
	}
	var fired bool
	c := newClient(t, memory.New(), turnstile.WithObserver(turnstile.ObserverFunc(func(turnstile.Event) { fired = true })))
	l, err := c.TryAcquire(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
	if !fired {
		t.Fatal("ObserverFunc not called")
	}
	if s := turnstile.EventType(200).String(); s != "EventType(200)" {
		t.Fatalf("unknown type prints %q", s)
	}
}
