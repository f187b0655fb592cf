package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/postgres"
)

// tenantConfig is the server's connection config with turnstile's tables
// in schema (created if missing): a tenant of its own, as
// docs/security/postgres.md recommends.
func tenantConfig(t *testing.T, schema string) *pgx.ConnConfig {
	t.Helper()
	if _, err := sqlConn(t, srv).Exec(ctxFor(t, 10*time.Second), "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		t.Fatal(err)
	}
	cfg := connConfig(t, srv)
	cfg.RuntimeParams = map[string]string{"search_path": schema}
	return cfg
}

// TestTenantsApart: two tenants of one database — turnstile's tables in
// two schemas — lock the same key each for itself, and a second client
// of a tenant is still kept out.
func TestTenantsApart(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	a := dialConfig(t, tenantConfig(t, "tsa"))
	b := dialConfig(t, tenantConfig(t, "tsb"))
	a2 := dialConfig(t, tenantConfig(t, "tsa"))
	if _, ok, err := a.Acquire(ctx, "nightly-report", "a", time.Minute); !ok || err != nil {
		t.Fatalf("tenant tsa: acquire = %v, %v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "nightly-report", "b", time.Minute); !ok || err != nil {
		t.Fatalf("tenant tsb: acquire of a key that only tenant tsa holds = %v, %v; want it granted", ok, err)
	}
	if _, ok, err := a2.Acquire(ctx, "nightly-report", "a2", time.Minute); ok || err != nil {
		t.Fatalf("a second client of tenant tsa: acquire = %v, %v; want refused", ok, err)
	}
	if postgres.LockID(a, "nightly-report") == postgres.LockID(b, "nightly-report") {
		t.Fatal("two tenants lock one key under the same advisory lock id")
	}
	if postgres.LockID(a, "nightly-report") != postgres.LockID(a2, "nightly-report") {
		t.Fatal("two clients of one tenant lock one key under different advisory lock ids")
	}
	for _, be := range []*postgres.Backend{a, b} {
		st, err := be.Inspect(ctx, "nightly-report")
		if err != nil || !st.Held || len(st.Holders) != 1 {
			t.Fatalf("inspect: %+v, %v", st, err)
		}
	}
	if _, err := a.Release(ctx, "nightly-report", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, "nightly-report", "b"); err != nil {
		t.Fatal(err)
	}
}

// TestOutsiderHoldShown: a role with nothing but CONNECT (PostgreSQL
// grants it to PUBLIC) that holds a key's advisory lock keeps turnstile's
// clients out; Inspect says the key is held, and by which session, not
// that it is free. The role cannot read turnstile's table.
func TestOutsiderHoldShown(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	admin := sqlConn(t, srv)
	if _, err := admin.Exec(ctx, `DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outsider') THEN CREATE ROLE outsider LOGIN; END IF;
END $$`); err != nil {
		t.Fatal(err)
	}
	be := dial(t, srv)
	ocfg := connConfig(t, srv)
	ocfg.User = "outsider"
	outsider, err := pgx.ConnectConfig(ctx, ocfg)
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close(context.Background())
	if _, err := outsider.Exec(ctx, "SELECT token FROM turnstile_locks LIMIT 1"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("the outsider reads turnstile_locks: %v", err)
	}
	const key = "outsider-held"
	var pid int
	if err := outsider.QueryRow(ctx, "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock($1)) l", postgres.LockID(be, key)).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := be.Acquire(ctx, key, "o", time.Minute); ok || err != nil {
		t.Fatalf("acquire while the outsider holds the advisory lock = %v, %v; want refused", ok, err)
	}
	st, err := be.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || len(st.Holders) != 1 {
		t.Fatalf("Inspect while the outsider holds the advisory lock = %+v; want held", st)
	}
	h := st.Holders[0]
	if want := fmt.Sprintf("pid %d", pid); !strings.Contains(h.Owner, want) || !strings.Contains(h.Owner, "outsider") || h.TTL != -1 {
		t.Fatalf("holder %+v; want an owner naming %q and user outsider, TTL -1 (the session's)", h, want)
	}
	t.Logf("holder: %s", h.Owner)
	if _, err := outsider.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}
	if st, err := be.Inspect(ctx, key); err != nil || st.Held {
		t.Fatalf("Inspect after the outsider let go = %+v, %v; want free", st, err)
	}
	if _, ok, err := be.Acquire(ctx, key, "o", time.Minute); !ok || err != nil {
		t.Fatalf("acquire after the outsider let go = %v, %v", ok, err)
	}
}

// TestLockIDCollision: two keys whose advisory lock ids collide (forced
// here) do not silently exclude each other: the second is refused with
// an error that names the first.
func TestLockIDCollision(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	same := func(string) int64 { return 0x5eed }
	a, b := dial(t, srv), dial(t, srv)
	postgres.SetLockID(a, same)
	postgres.SetLockID(b, same)
	if _, ok, err := a.Acquire(ctx, "collide-1", "a", time.Minute); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	_, ok, err := b.Acquire(ctx, "collide-2", "b", time.Minute)
	if ok || !errors.Is(err, postgres.ErrLockIDCollision) || !strings.Contains(err.Error(), `"collide-1"`) {
		t.Fatalf("acquire of a key whose lock id another held key has = %v, %v; want ErrLockIDCollision naming collide-1", ok, err)
	}
	t.Log(err)
	// The colliding key itself, held, is refused as usual.
	if _, ok, err := b.Acquire(ctx, "collide-1", "b", time.Minute); ok || err != nil {
		t.Fatalf("acquire of the held key = %v, %v; want refused", ok, err)
	}
	if _, err := a.Release(ctx, "collide-1", "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Acquire(ctx, "collide-2", "b", time.Minute); !ok || err != nil {
		t.Fatalf("acquire once the other key is free = %v, %v", ok, err)
	}
	if _, err := b.Release(ctx, "collide-2", "b"); err != nil {
		t.Fatal(err)
	}
}

// TestURLNamesNoServer: a URL that names no server says so, without
// echoing its password.
func TestURLNamesNoServer(t *testing.T) {
	for _, u := range []string{"postgres://", "postgresql://", "postgres://u:hunter2-secret@", "postgres://u:hunter2-secret@/db", "postgres://u:hunter2-secret@:5432/db"} {
		_, err := turnstile.Open(context.Background(), u)
		if !errors.Is(err, turnstile.ErrInvalidURL) || !strings.Contains(err.Error(), "no host") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "cannot parse") {
			t.Errorf("Open(%q) = %v; want ErrInvalidURL saying it names no host, without the password", u, err)
		}
	}
}

// TestDialPastSetUpLock: a role that may only connect and holds the
// advisory lock that serialises setting a schema up does not keep
// clients from connecting once the schema is set up.
func TestDialPastSetUpLock(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	cfg := tenantConfig(t, "tssetup")
	_ = dialConfig(t, cfg)
	ocfg := connConfig(t, srv)
	ocfg.User = "outsider"
	if _, err := sqlConn(t, srv).Exec(ctx, `DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outsider') THEN CREATE ROLE outsider LOGIN; END IF;
END $$`); err != nil {
		t.Fatal(err)
	}
	outsider, err := pgx.ConnectConfig(ctx, ocfg)
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close(context.Background())
	if _, err := outsider.Exec(ctx, "SELECT pg_advisory_lock(7379622101416928513)"); err != nil {
		t.Fatal(err)
	}
	b, err := postgres.Dial(ctx, cfg, postgres.WithOpTimeout(3*time.Second))
	if err != nil {
		t.Fatalf("Dial of a set-up schema while an outsider holds the set-up lock: %v", err)
	}
	defer b.Close()
	if _, ok, err := b.Acquire(ctx, "past-setup", "o", time.Minute); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
}
