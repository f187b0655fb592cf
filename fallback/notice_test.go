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

// telling is a store whose Release may send no notice: it counts the
// releases made with the notice in any case (driver.NoticeReleaser), and
// says nobody else tried the lock.
type telling struct {
	*memory.Backend
	always atomic.Int64
}

func (a *telling) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (bool, bool, error) {
	if n == driver.NoticeAlways {
		a.always.Add(1)
	}
	ok, err := a.Release(ctx, key, owner)
	return ok, false, err
}

var _ driver.NoticeReleaser = (*telling)(nil)

// TestReleaseNoticeReachesTheStore: ReleaseNotice releases in the store
// that granted the lease with that store's ReleaseNotice and its mode,
// and passes on whether the store said someone else had tried; a store
// without it gets its Release, which counts as having told.
func TestReleaseNoticeReachesTheStore(t *testing.T) {
	ctx := ctxFor(t, 5*time.Second)
	p := &telling{Backend: memory.New()}
	b, err := fallback.New(p, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []driver.Notice{driver.NoticeIfTried, driver.NoticeAlways} {
		if _, ok, err := b.Acquire(ctx, "k", "a", time.Second); !ok || err != nil {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		ok, tried, err := b.ReleaseNotice(ctx, "k", "a", n)
		if !ok || tried || err != nil {
			t.Fatalf("release %d: ok=%v tried=%v err=%v", i, ok, tried, err)
		}
		if _, _, _, held := p.Holder("k"); held {
			t.Fatalf("release %d left the lock held", i)
		}
		if got, want := p.always.Load(), int64(i); got != want {
			t.Fatalf("after release %d the primary released with the notice in any case %d times, want %d", i, got, want)
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
	if ok, tried, err := b2.ReleaseNotice(ctx, "k", "a", driver.NoticeAlways); !ok || !tried || err != nil {
		t.Fatalf("ReleaseNotice over a store without it: ok=%v tried=%v err=%v", ok, tried, err)
	}
}
