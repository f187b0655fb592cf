package fallback_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/memory"
)

// aloud is a store whose Release may send no notice: it counts the
// releases made aloud (driver.AloudReleaser).
type aloud struct {
	*memory.Backend
	n atomic.Int64
}

func (a *aloud) ReleaseAloud(ctx context.Context, key, owner string) (bool, error) {
	a.n.Add(1)
	return a.Release(ctx, key, owner)
}

var _ driver.AloudReleaser = (*aloud)(nil)

// TestReleaseAloudReachesTheStore: ReleaseAloud releases in the store
// that granted the lease with that store's ReleaseAloud; Release does not
// use it; a store without it gets its Release.
func TestReleaseAloudReachesTheStore(t *testing.T) {
	ctx := ctxFor(t, 5*time.Second)
	p := &aloud{Backend: memory.New()}
	b, err := fallback.New(p, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	for i, viaAloud := range []bool{false, true} {
		if _, ok, err := b.Acquire(ctx, "k", "a", time.Second); !ok || err != nil {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		release := b.Release
		if viaAloud {
			release = b.ReleaseAloud
		}
		if ok, err := release(ctx, "k", "a"); !ok || err != nil {
			t.Fatalf("release %d: %v %v", i, ok, err)
		}
		if _, _, _, held := p.Holder("k"); held {
			t.Fatalf("release %d left the lock held", i)
		}
		if got, want := p.n.Load(), int64(i); got != want {
			t.Fatalf("after release %d the primary released aloud %d times, want %d", i, got, want)
		}
	}

	plain := memory.New()
	b2, err := fallback.New(plain, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b2.Acquire(ctx, "k", "a", time.Second); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if ok, err := b2.ReleaseAloud(ctx, "k", "a"); !ok || err != nil {
		t.Fatalf("ReleaseAloud over a store without it: %v %v", ok, err)
	}
}
