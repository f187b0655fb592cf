package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/mysql"
)

// TestKinds runs the conformance cases of the reentrant lock, the
// semaphore and the read-write lock on one server, then the stored number
// of permits, the kinds on a table an older version made, and the
// privileges the kinds need.
func TestKinds(t *testing.T) {
	srv := testserver.StartMySQL(t)
	ctx := func(t testing.TB) context.Context { return testserver.Ctx(t, 30*time.Second) }

	// Before any kind ran: an older version's table, with a token.
	mustExec(t, srv, "USE "+mysqlproc.Database+"; CREATE TABLE IF NOT EXISTS turnstile_locks (name VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT UNSIGNED NOT NULL, owner VARBINARY(255) NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE = InnoDB; INSERT INTO turnstile_locks VALUES ('old', 9000000000000000000, '', NOW(6))")
	t.Run("Migrate", func(t *testing.T) {
		b := dial(t, srv)
		r := must(t)(turnstile.Reentrant(b))
		tok, ok, err := r.Acquire(ctx(t), "old", "a", time.Minute)
		if !ok || err != nil {
			t.Fatalf("reentrant on an older table: %v, %v", ok, err)
		}
		if tok != 9000000000000000001 {
			t.Fatalf("token %d does not continue the old row's 9000000000000000000", tok)
		}
		if tok2, ok, err := r.Acquire(ctx(t), "old", "a", time.Minute); !ok || err != nil || tok2 != tok {
			t.Fatalf("re-entry: %d, %v, %v; want the first token %d", tok2, ok, err, tok)
		}
		if _, ok, err := r.Acquire(ctx(t), "old", "b", time.Minute); ok || err != nil {
			t.Fatalf("another owner: %v, %v; want refused", ok, err)
		}
		for i := range 2 {
			if ok, err := r.Release(ctx(t), "old", "a"); !ok || err != nil {
				t.Fatalf("release %d: %v, %v", i, ok, err)
			}
		}
		if ok, err := r.Release(ctx(t), "old", "a"); ok || err != nil {
			t.Fatalf("a third release: %v, %v; want false", ok, err)
		}
		plain, ok, err := b.Acquire(ctx(t), "old", "p", time.Minute)
		if !ok || err != nil || plain <= tok {
			t.Fatalf("plain lock after the reentrant one: %d, %v, %v; want a token above %d", plain, ok, err, tok)
		}
	})

	t.Run("Reentrant", func(t *testing.T) {
		t.Parallel()
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return must(t)(turnstile.Reentrant(dial(t, srv))) },
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		t.Parallel()
		locktest.RunSemaphore(t, locktest.Harness{
			New:   func(t testing.TB) driver.Backend { return must(t)(turnstile.Semaphore(dial(t, srv), 3)) },
			TTL:   time.Second,
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
	t.Run("PermitsStored", func(t *testing.T) {
		t.Parallel()
		b := dial(t, srv)
		two := must(t)(turnstile.Semaphore(b, 2))
		five := must(t)(turnstile.Semaphore(b, 5))
		if _, ok, err := two.Acquire(ctx(t), "kinds-permits", "a", time.Minute); !ok || err != nil {
			t.Fatalf("first permit: %v, %v", ok, err)
		}
		_, ok, err := five.Acquire(ctx(t), "kinds-permits", "b", time.Minute)
		if ok || !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "2 permits, not 5") {
			t.Fatalf("permit through a view of 5 while 2 are stored: %v, %v; want ErrInvalidOption naming 2 and 5", ok, err)
		}
		if ok, err := two.Release(ctx(t), "kinds-permits", "a"); !ok || err != nil {
			t.Fatalf("release: %v, %v", ok, err)
		}
		if _, ok, err := five.Acquire(ctx(t), "kinds-permits", "b", time.Minute); !ok || err != nil {
			t.Fatalf("permit through a view of 5 once none is held: %v, %v", ok, err)
		}
		if _, err := turnstile.Semaphore(b, 0); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("Semaphore(0): %v, want ErrInvalidOption", err)
		}
		if _, err := turnstile.Fair(b); !errors.Is(err, turnstile.ErrUnsupported) {
			t.Fatalf("Fair: %v, want ErrUnsupported", err)
		}
	})
	t.Run("Inspect", func(t *testing.T) {
		t.Parallel()
		b := dial(t, srv)
		sem := must(t)(turnstile.Semaphore(b, 3))
		var toks []uint64
		for _, kc := range []struct{ key, owner string }{{"kinds-insp/a", "o1"}, {"kinds-insp/a", "o2"}, {"kinds-insp/b", "o3"}} {
			tok, ok, err := sem.Acquire(ctx(t), kc.key, kc.owner, time.Minute)
			if !ok || err != nil {
				t.Fatalf("permit of %s for %s: %v, %v", kc.key, kc.owner, ok, err)
			}
			toks = append(toks, tok)
		}
		in := sem.(driver.Inspector)
		st, err := in.Inspect(ctx(t), "kinds-insp/a")
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
		if st, err := in.Inspect(ctx(t), "kinds-insp/none"); err != nil || st.Held {
			t.Fatalf("Inspect of a key never locked = %+v, %v; want not held", st, err)
		}
		if st, err := must(t)(turnstile.Reentrant(b)).(driver.Inspector).Inspect(ctx(t), "kinds-insp/a"); err != nil || st.Held {
			t.Fatalf("reentrant Inspect of a semaphore's key = %+v, %v; want not held", st, err)
		}
		states, more, err := in.List(ctx(t), "kinds-insp/", 1)
		if err != nil || len(states) != 1 || !more || states[0].Key != "kinds-insp/a" || len(states[0].Holders) != 2 {
			t.Fatalf("List limit 1 = %+v, %v, %v; want kinds-insp/a's 2 holders and more", states, more, err)
		}
		states, more, err = in.List(ctx(t), "kinds-insp/", 10)
		if err != nil || len(states) != 2 || more || states[1].Key != "kinds-insp/b" || states[1].Holders[0].Owner != "o3" {
			t.Fatalf("List = %+v, %v, %v; want both keys", states, more, err)
		}
		if _, _, err := in.List(ctx(t), "", 0); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("List with limit 0: %v, want ErrInvalidOption", err)
		}
	})
	t.Run("Privileges", func(t *testing.T) {
		t.Parallel()
		// The plain lock's grants: plain locks work, the kinds are refused
		// naming their table; with the kinds' grants they work.
		db := mysqlproc.Database
		mustExec(t, srv, "CREATE USER 'kinds'@'%' IDENTIFIED BY 'kinds-pw'; GRANT CREATE, SELECT, INSERT, UPDATE ON "+db+".turnstile_locks TO 'kinds'@'%'")
		cfg := config(srv)
		cfg.User, cfg.Passwd = "kinds", "kinds-pw"
		b, err := mysql.Dial(ctx(t), cfg)
		if err != nil {
			t.Fatalf("Dial with the plain lock's grants: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		if _, ok, err := b.Acquire(ctx(t), "kinds-priv", "a", time.Minute); !ok || err != nil {
			t.Fatalf("plain lock: %v, %v", ok, err)
		}
		r := must(t)(turnstile.Reentrant(b))
		_, _, err = r.Acquire(ctx(t), "kinds-priv", "a", time.Minute)
		if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "turnstile_holds") {
			t.Fatalf("reentrant lock without grants on turnstile_holds: %v; want ErrPermission naming it", err)
		}
		mustExec(t, srv, "GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON "+db+".turnstile_holds TO 'kinds'@'%'")
		if _, ok, err := r.Acquire(ctx(t), "kinds-priv", "a", time.Minute); !ok || err != nil {
			t.Fatalf("reentrant lock with the kinds' grants: %v, %v", ok, err)
		}
		if ok, err := r.Release(ctx(t), "kinds-priv", "a"); !ok || err != nil {
			t.Fatalf("release: %v, %v", ok, err)
		}
	})
}

// must returns the view, failing t on an error.
func must(t testing.TB) func(driver.Backend, error) driver.Backend {
	return locktest.View[driver.Backend](t)
}
