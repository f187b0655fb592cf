package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
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
		r, tok := inspecttest.ReentrantAfterOldToken(t, ctx(t), b)
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

	inspecttest.RunSQLKinds(t, func(t testing.TB) driver.Backend { return dial(t, srv) }, time.Second)
	t.Run("PermitsStored", func(t *testing.T) {
		t.Parallel()
		b := dial(t, srv)
		inspecttest.PermitsStored(t, ctx(t), b)
	})
	t.Run("Inspect", func(t *testing.T) {
		t.Parallel()
		b := dial(t, srv)
		in := inspecttest.SemaphoreInspect(t, ctx(t), b)
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
