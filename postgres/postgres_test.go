package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/badurl"
	"github.com/turnstilelock/turnstile/postgres"
)

// TestManyLocksFewConnections: one Client holds 10,000 locks at once on
// at most its configured number of connections, where one connection per
// held lock would exhaust the pool.
func TestManyLocksFewConnections(t *testing.T) {
	const n, conns = 10000, 4
	ctx := ctxFor(t, 2*time.Minute)
	cfg := connConfig(t, srv)
	app := "turnstile-many-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.RuntimeParams = map[string]string{"application_name": app}
	c, err := turnstile.New(dialConfig(t, cfg, postgres.WithConns(conns)), turnstile.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	leases := make([]*turnstile.Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				l, err := c.TryAcquire(ctx, fmt.Sprintf("many:%s:%d", app, i))
				if err != nil {
					errs <- err
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	inspect := sqlConn(t, srv)
	var sessions, advisory int
	if err := inspect.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if err := inspect.QueryRow(ctx, `
		SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`, app).Scan(&advisory); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d locks held on %d sessions (%d advisory locks)", n, sessions, advisory)
	if sessions < 1 || sessions > conns {
		t.Errorf("%d sessions hold the locks, want 1..%d", sessions, conns)
	}
	if advisory != n {
		t.Errorf("%d advisory locks granted, want %d", advisory, n)
	}

	other, err := turnstile.New(dial(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	for _, i := range []int{0, 1, n / 2, n - 1} {
		if _, err := other.TryAcquire(ctx, fmt.Sprintf("many:%s:%d", app, i)); !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("another client took held key %d: %v", i, err)
		}
	}
	for i, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// TestDeadSessionLosesLocks: when the session holding a lock is
// terminated, its holder's next renewal reports the lock lost, and once
// the TTL has passed another owner takes it with a larger token.
func TestDeadSessionLosesLocks(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	be := dial(t, srv, postgres.WithConns(1))
	// The row must outlive the steps below on a busy machine: killing the
	// session, a failed renewal and a new pool's first acquisition.
	const ttl = 3 * time.Second
	start := time.Now()
	tok, ok, err := be.Acquire(ctx, "dead-session", "a", ttl)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	inspect := sqlConn(t, srv)
	// Terminate every session that holds an advisory lock (tests run one
	// at a time; only be's does), as a server-side kill or a broken
	// connection would.
	var killed int
	if err := inspect.QueryRow(ctx, `
		SELECT count(pg_terminate_backend(pid)) FROM (SELECT DISTINCT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()) p`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no session held an advisory lock")
	}
	time.Sleep(50 * time.Millisecond)
	if ok, err := be.Extend(ctx, "dead-session", "a", ttl); ok {
		t.Fatalf("Extend after the session died = %v, %v; want false", ok, err)
	}
	other := dial(t, srv)
	if _, ok, err := other.Acquire(ctx, "dead-session", "b", ttl); ok || err != nil {
		t.Fatalf("%v after the acquisition, before the TTL, the row still holds the lock; acquire = %v, %v",
			time.Since(start).Round(time.Millisecond), ok, err)
	}
	time.Sleep(time.Until(start.Add(ttl + 100*time.Millisecond)))
	tok2, ok, err := other.Acquire(ctx, "dead-session", "b", ttl)
	if err != nil || !ok {
		t.Fatalf("acquire after the TTL: %v %v", ok, err)
	}
	if tok2 <= tok {
		t.Fatalf("token %d not greater than %d", tok2, tok)
	}
	// be dials a new session and works again.
	if _, ok, err := be.Acquire(ctx, "dead-session-2", "a", ttl); err != nil || !ok {
		t.Fatalf("acquire on a new session: %v %v", ok, err)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	for _, scheme := range []string{"postgres", "postgresql"} {
		u, _ := url.Parse(srv.URL())
		u.Scheme = scheme
		q := u.Query()
		q.Set("lock_conns", "2")
		u.RawQuery = q.Encode()
		c, err := turnstile.Open(ctx, u.String())
		if err != nil {
			t.Fatalf("Open(%s): %v", u, err)
		}
		l, err := c.TryAcquire(ctx, "open-url-"+scheme)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		_ = c.Close()
	}
}

func TestBadURL(t *testing.T) {
	badurl.Refused(t,
		"postgres://h/db?lock_conns=0",
		"postgres://h/db?lock_conns=x",
		"postgres://h/db?lock_conns=1&lock_conns=2",
		"postgres://h/db?op_timeout=-1s",
		"postgres://h/db#frag",
		"postgres:opaque",
		"postgres://h:99999999/db",
	)
}

func TestNameAndClose(t *testing.T) {
	be := dial(t, srv)
	if want := "postgres " + srv.Addr() + "/postgres"; be.Name() != want {
		t.Fatalf("Name() = %q, want %q", be.Name(), want)
	}
	_ = be.Close()
	if _, _, err := be.Acquire(context.Background(), "k", "o", time.Second); !errors.Is(err, turnstile.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want turnstile.ErrClosed", err)
	}
}

// TestBadOptions: an option out of range fails Dial at once, naming it.
func TestBadOptions(t *testing.T) {
	cfg, err := pgx.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt  postgres.Option
		says string
	}{
		{postgres.WithConns(0), "lock connections"},
		{postgres.WithConns(1025), "lock connections"},
		{postgres.WithOpTimeout(0), "operation timeout"},
		{nil, "nil option"},
	} {
		b, err := postgres.Dial(ctxFor(t, 10*time.Second), cfg, tc.opt)
		if !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Dial with a bad option: %v; want ErrInvalidOption saying %q", err, tc.says)
		}
		if b != nil {
			_ = b.Close()
		}
	}
}
