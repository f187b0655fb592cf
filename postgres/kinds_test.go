package postgres_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
)

// TestKinds runs the conformance cases of the reentrant lock, the
// semaphore and the read-write lock on the package's server.
func TestKinds(t *testing.T) {
	// Dialling the next instance runs Dial's schema statement, which can
	// take a few hundred milliseconds on a busy machine: permits must
	// outlive it.
	inspecttest.RunSQLKinds(t, func(t testing.TB) driver.Backend { return dial(t, srv) }, 2*time.Second)
}

// TestKindsPermitsStored: while a permit is held, a semaphore view with
// another number is refused, naming both numbers; once it is returned,
// the other number holds.
func TestKindsPermitsStored(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	inspecttest.PermitsStored(t, ctx, dial(t, srv))
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
	_, tok := inspecttest.ReentrantAfterOldToken(t, ctx, b)
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
	in := inspecttest.SemaphoreInspect(t, ctx, dial(t, srv))
	if _, _, err := in.List(ctx, "", 0); err == nil {
		t.Fatal("List with limit 0: no error")
	}
}
