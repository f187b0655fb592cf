package fallback_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/memory"
)

// TestInspectFollowsServingStore: Inspect, List and ForceRelease go to
// the store that serves acquisitions — the primary, then, after the
// breaker opened, the secondary — and leave the other store alone.
func TestInspectFollowsServingStore(t *testing.T) {
	ctx := context.Background()
	b, p, s := newPair(t, nil)
	if _, ok, err := p.Backend.Acquire(ctx, "k", "on-primary", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, err := s.Backend.Acquire(ctx, "k", "on-secondary", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if st, err := b.Inspect(ctx, "k"); err != nil || !st.Held || st.Holders[0].Owner != "on-primary" {
		t.Errorf("Inspect while the primary serves = %+v, %v", st, err)
	}

	// Trip the breaker: the secondary serves.
	p.down.Store(true)
	for range unitTripAft {
		_, _, _ = b.Acquire(ctx, "trip", "o", unitTTL)
	}
	if b.State() == fallback.StateClosed {
		t.Fatal("the breaker did not open")
	}
	st, err := b.Inspect(ctx, "k")
	if err != nil || !st.Held || st.Holders[0].Owner != "on-secondary" {
		t.Errorf("Inspect while the secondary serves = %+v, %v", st, err)
	}
	states, _, err := b.List(ctx, "k", 10)
	if err != nil || len(states) != 1 || states[0].Holders[0].Owner != "on-secondary" {
		t.Errorf("List while the secondary serves = %+v, %v", states, err)
	}
	removed, err := b.ForceRelease(ctx, "k")
	if err != nil || !removed.Held || removed.Holders[0].Owner != "on-secondary" {
		t.Errorf("ForceRelease = %+v, %v", removed, err)
	}
	if _, _, _, held := s.Holder("k"); held {
		t.Error("the secondary still holds k")
	}
	if o, _, _, held := p.Holder("k"); !held || o != "on-primary" {
		t.Error("ForceRelease reached the primary, which does not serve")
	}
}

// TestInspectUnsupportedStore: a serving store that cannot be inspected
// gives ErrUnsupported, which is no store failure: the breaker stays
// closed however often it is asked.
func TestInspectUnsupportedStore(t *testing.T) {
	ctx := context.Background()
	b, err := fallback.New(bare{memory.New()}, memory.New(), fallback.WithTripAfter(2))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		_, ierr := b.Inspect(ctx, "k")
		_, _, lerr := b.List(ctx, "", 10)
		_, ferr := b.ForceRelease(ctx, "k")
		for _, err := range []error{ierr, lerr, ferr} {
			if !errors.Is(err, turnstile.ErrUnsupported) {
				t.Fatalf("%v, want ErrUnsupported", err)
			}
		}
	}
	if b.State() != fallback.StateClosed {
		t.Errorf("breaker %v after unsupported calls, want closed", b.State())
	}
}

// bare hides every capability of a backend but locking.
type bare struct{ b driver.Backend }

func (x bare) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return x.b.Acquire(ctx, key, owner, ttl)
}
func (x bare) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return x.b.Extend(ctx, key, owner, ttl)
}
func (x bare) Release(ctx context.Context, key, owner string) (bool, error) {
	return x.b.Release(ctx, key, owner)
}
