package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestKinds runs the conformance cases of the reentrant lock, the
// semaphore and the read-write lock on the package's server.
func TestKinds(t *testing.T) {
	// The kinds' keys are apart, so their cases run side by side.
	t.Run("Reentrant", func(t *testing.T) {
		t.Parallel()
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return must(t)(turnstile.Reentrant(dial(t, srv))) },
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		t.Parallel()
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return must(t)(turnstile.Semaphore(dial(t, srv), 3)) },
			// Dialling the next instance runs Dial's schema statement,
			// which can take a few hundred milliseconds on a busy machine:
			// permits must outlive it.
			TTL:   2 * time.Second,
			Plain: func(t testing.TB) driver.Backend { return dial(t, srv) },
		}, 3)
	})
	t.Run("ReadWrite", func(t *testing.T) {
		t.Parallel()
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			r, w, err := turnstile.ReadWrite(dial(t, srv), turnstile.WithWriterClaim(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			return r, w
		})
	})
}

// must returns the view, failing t on an error.
func must(t testing.TB) func(driver.Backend, error) driver.Backend {
	return locktest.View[driver.Backend](t)
}

// TestKindsPermitsStored: while a permit is held, a semaphore view with
// another number is refused, naming both numbers; once it is returned,
// the other number holds.
func TestKindsPermitsStored(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t, srv)
	two := must(t)(turnstile.Semaphore(b, 2))
	five := must(t)(turnstile.Semaphore(b, 5))
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

// TestKindsMigrate: a database whose turnstile_locks an older version
// made (no turnstile_holds) gets the kinds' table on Dial, and their
// tokens continue the key's fence.
func TestKindsMigrate(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	c := sqlConn(t, srv)
	for _, q := range []string{
		`DROP SCHEMA IF EXISTS kinds_old CASCADE`,
		`CREATE SCHEMA kinds_old`,
		`CREATE TABLE kinds_old.turnstile_locks (key text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL)`,
		`INSERT INTO kinds_old.turnstile_locks VALUES ('old', '', 9000000000000000000, '-infinity')`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg := connConfig(t, srv)
	cfg.RuntimeParams["search_path"] = "kinds_old"
	b := dialConfig(t, cfg)
	r := must(t)(turnstile.Reentrant(b))
	tok, ok, err := r.Acquire(ctx, "old", "a", time.Minute)
	if !ok || err != nil {
		t.Fatalf("reentrant on a migrated table: %v, %v", ok, err)
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
	plain, ok, err := b.Acquire(ctx, "old", "p", time.Minute)
	if !ok || err != nil || plain <= tok {
		t.Fatalf("plain lock after the reentrant one: %d, %v, %v; want a token above %d", plain, ok, err, tok)
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM kinds_old.turnstile_holds WHERE key = 'old'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("holds of old: %d, %v; want 1", n, err)
	}
}

// TestKindsInspect: a view's Inspect and List show its kind's live
// holders, each with its token and time left.
func TestKindsInspect(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t, srv)
	sem := must(t)(turnstile.Semaphore(b, 3))
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
	if st, err := must(t)(turnstile.Reentrant(b)).(driver.Inspector).Inspect(ctx, "kinds-insp/a"); err != nil || st.Held {
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
	if _, _, err := in.List(ctx, "", 0); err == nil {
		t.Fatal("List with limit 0: no error")
	}
}
