package inspecttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

// RunSQLKinds runs the conformance cases of the reentrant lock, the
// semaphore of 3 permits, whose permits last semTTL, and the read-write
// lock, whose waiting writer's claim lasts half a second, side by side
// (their keys are apart), each on views of Backends from dial, as the SQL
// stores have them.
func RunSQLKinds(t *testing.T, dial func(testing.TB) driver.Backend, semTTL time.Duration) {
	t.Run("Reentrant", func(t *testing.T) {
		t.Parallel()
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				return locktest.View[driver.Backend](t)(turnstile.Reentrant(dial(t)))
			},
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		t.Parallel()
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				return locktest.View[driver.Backend](t)(turnstile.Semaphore(dial(t), 3))
			},
			TTL:   semTTL,
			Plain: dial,
		}, 3)
	})
	t.Run("ReadWrite", func(t *testing.T) {
		t.Parallel()
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			r, w, err := turnstile.ReadWrite(dial(t), turnstile.WithWriterClaim(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			return r, w
		})
	})
}

// ReentrantAfterOldToken checks b's reentrant view on a key whose row an
// older version of the store left with token 9000000000000000000: the
// first hold's token continues it, re-entry by its owner returns the
// same token, and another owner is refused. It returns the view and the
// token.
func ReentrantAfterOldToken(t *testing.T, ctx context.Context, b driver.Backend) (driver.Backend, uint64) {
	t.Helper()
	r := locktest.View[driver.Backend](t)(turnstile.Reentrant(b))
	tok, ok, err := r.Acquire(ctx, "old", "a", time.Minute)
	if !ok || err != nil {
		t.Fatalf("reentrant on an older version's table: %v, %v", ok, err)
	}
	if tok != 9000000000000000001 {
		t.Fatalf("token %d does not continue the old row's 9000000000000000000", tok)
	}
	if tok2, ok, err := r.Acquire(ctx, "old", "a", time.Minute); !ok || err != nil || tok2 != tok {
		t.Fatalf("re-entry: %d, %v, %v; want the first token %d", tok2, ok, err, tok)
	}
	if _, ok, err := r.Acquire(ctx, "old", "b", time.Minute); ok || err != nil {
		t.Fatalf("another owner: %v, %v; want refused", ok, err)
	}
	return r, tok
}

// PermitsStored checks the number of permits a SQL store keeps with a
// semaphore's key: while a permit is held through a view of 2, a view of
// 5 is refused with turnstile.ErrInvalidOption naming both; once it is
// returned, the view of 5 holds. b refuses a semaphore of no permits and
// has no fair view.
func PermitsStored(t *testing.T, ctx context.Context, b driver.Backend) {
	t.Helper()
	view := locktest.View[driver.Backend](t)
	two := view(turnstile.Semaphore(b, 2))
	five := view(turnstile.Semaphore(b, 5))
	if _, ok, err := two.Acquire(ctx, "kinds-permits", "a", time.Minute); !ok || err != nil {
		t.Fatalf("first permit: %v, %v", ok, err)
	}
	_, ok, err := five.Acquire(ctx, "kinds-permits", "b", time.Minute)
	if ok || !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "2 permits, not 5") {
		t.Fatalf("permit through a view of 5 while 2 are stored: %v, %v; want ErrInvalidOption naming 2 and 5", ok, err)
	}
	if ok, err := two.Release(ctx, "kinds-permits", "a"); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if _, ok, err := five.Acquire(ctx, "kinds-permits", "b", time.Minute); !ok || err != nil {
		t.Fatalf("permit through a view of 5 once none is held: %v, %v", ok, err)
	}
	if _, err := turnstile.Semaphore(b, 0); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("Semaphore(0): %v, want ErrInvalidOption", err)
	}
	if _, err := turnstile.Fair(b); !errors.Is(err, turnstile.ErrUnsupported) {
		t.Fatalf("Fair: %v, want ErrUnsupported", err)
	}
}

// SemaphoreInspect checks Inspect and List of b's semaphore view of 3
// permits on a SQL store: two permits of kinds-insp/a and one of
// kinds-insp/b are held; Inspect shows a key's holders with their time
// left, its last token and no queue (Waiters -1), and a key never locked
// as free, as does the reentrant view for the semaphore's key; List
// pages through the keys. It returns the semaphore view.
func SemaphoreInspect(t *testing.T, ctx context.Context, b driver.Backend) driver.Inspector {
	t.Helper()
	sem := locktest.View[driver.Backend](t)(turnstile.Semaphore(b, 3))
	var toks []uint64
	for _, kc := range []struct{ key, owner string }{{"kinds-insp/a", "o1"}, {"kinds-insp/a", "o2"}, {"kinds-insp/b", "o3"}} {
		tok, ok, err := sem.Acquire(ctx, kc.key, kc.owner, time.Minute)
		if !ok || err != nil {
			t.Fatalf("permit of %s for %s: %v, %v", kc.key, kc.owner, ok, err)
		}
		toks = append(toks, tok)
	}
	in := sem.(driver.Inspector)
	st, err := in.Inspect(ctx, "kinds-insp/a")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || len(st.Holders) != 2 || st.Token != toks[1] || st.Waiters != -1 {
		t.Fatalf("Inspect = %+v; want 2 holders, token %d, no queue", st, toks[1])
	}
	for i, h := range st.Holders {
		if h.TTL <= 0 || h.TTL > time.Minute || (h.Owner != "o1" && h.Owner != "o2") {
			t.Fatalf("holder %d = %+v", i, h)
		}
	}
	if st, err := in.Inspect(ctx, "kinds-insp/none"); err != nil || st.Held {
		t.Fatalf("Inspect of a key never locked = %+v, %v; want not held", st, err)
	}
	if st, err := locktest.View[driver.Inspector](t)(turnstile.Reentrant(b)).Inspect(ctx, "kinds-insp/a"); err != nil || st.Held {
		t.Fatalf("reentrant Inspect of a semaphore's key = %+v, %v; want not held", st, err)
	}
	states, more, err := in.List(ctx, "kinds-insp/", 1)
	if err != nil || len(states) != 1 || !more || states[0].Key != "kinds-insp/a" || len(states[0].Holders) != 2 {
		t.Fatalf("List limit 1 = %+v, %v, %v; want kinds-insp/a's 2 holders and more", states, more, err)
	}
	states, more, err = in.List(ctx, "kinds-insp/", 10)
	if err != nil || len(states) != 2 || more || states[1].Key != "kinds-insp/b" || states[1].Holders[0].Owner != "o3" {
		t.Fatalf("List = %+v, %v, %v; want both keys", states, more, err)
	}
	return in
}
