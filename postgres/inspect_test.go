package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
	"github.com/turnstilelock/turnstile/postgres"
)

func TestInspect(t *testing.T) {
	b := dial(t, srv)

	t.Run("Free", func(t *testing.T) { inspecttest.InspectNeverLocked(t, b) })
	t.Run("HeldThenReleased", func(t *testing.T) { inspecttest.HeldThenReleased(t, b, dial(t, srv)) })

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		inspecttest.ListHeld(t, ctx, b, "ls/\U0010FFFF")
		if _, _, err := b.List(ctx, "ls/\xff", 10); !errors.Is(err, turnstile.ErrInvalidKey) || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("List with a prefix that is not UTF-8: %v, want an error saying so", err)
		}
	})

	t.Run("ListUsesIndex", func(t *testing.T) {
		// With sequential scans priced out, the plan shows which index the
		// query can use at all.
		ctx := ctxFor(t, 10*time.Second)
		c := sqlConn(t, srv)
		if _, err := c.Exec(ctx, "SET enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
		rows, err := c.Query(ctx, "EXPLAIN "+postgres.ListSQL, "ls/", "ls0", 11)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(plan, "\n"); !strings.Contains(p, "turnstile_locks_key_c") || !strings.Contains(p, "Index Cond") {
			t.Fatalf("List's plan does not read a range of index turnstile_locks_key_c:\n%s", p)
		}
	})
}

func TestForceRelease(t *testing.T) {
	t.Run("OwnHolder", func(t *testing.T) {
		// Forced through the Backend that holds the lock, the advisory
		// lock goes at once: another Backend takes the key straight away.
		inspecttest.ForceOwnHolder(t, dial(t, srv), dial(t, srv))
	})

	t.Run("BatchRenewalTellsWaiters", func(t *testing.T) {
		// A batch renewal that finds rows forced free gives up their
		// advisory locks and tells the keys' waiters, as a release does.
		ctx := ctxFor(t, 30*time.Second)
		b, op := dial(t, srv), dial(t, srv)
		keys := []string{"force-batch-1", "force-batch-2"}
		var reqs []driver.ExtendRequest
		for _, k := range keys {
			if _, ok, err := b.Acquire(ctx, k, "stuck", time.Minute); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if _, err := op.ForceRelease(ctx, k); err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, driver.ExtendRequest{Key: k, Owner: "stuck", TTL: time.Minute})
		}
		var notices []<-chan struct{}
		for _, k := range keys {
			ch, stop, err := op.Released(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			notices = append(notices, ch)
		}
		for i, r := range b.ExtendMany(ctx, reqs) {
			if r.OK || r.Err != nil {
				t.Fatalf("ExtendMany of forced-free %q = %+v, want not OK", keys[i], r)
			}
		}
		for i, ch := range notices {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("no release notice for %q when the batch renewal gave up its advisory lock", keys[i])
			}
		}
		for _, k := range keys {
			if _, ok, err := op.Acquire(ctx, k, "next", time.Minute); !ok || err != nil {
				t.Fatalf("Acquire %q after the batch renewal = %v, %v", k, ok, err)
			}
		}
	})

	t.Run("RaisesFence", func(t *testing.T) {
		// The removed holder's writes through fence.Postgres are refused
		// once the lock was forced away, even by a guard that accepts the
		// last token again (a holder's retried write), and the next
		// holder's pass a guard that does not.
		ctx := ctxFor(t, 60*time.Second)
		c := sqlConn(t, srv)
		if err := fence.Migrate(ctx, c); err != nil {
			t.Fatal(err)
		}
		same, err := fence.NewPostgres(fence.AllowSameToken())
		if err != nil {
			t.Fatal(err)
		}
		strict, err := fence.NewPostgres()
		if err != nil {
			t.Fatal(err)
		}
		write := func(g *fence.Postgres, resource string, token uint64) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := g.Check(ctx, tx, resource, token); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
		b := dial(t, srv)
		for _, k := range []string{"fenced-written", "fenced-unwritten"} {
			old, ok, err := b.Acquire(ctx, k, "old", time.Minute)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			if k == "fenced-written" {
				if err := write(same, k, old); err != nil {
					t.Fatalf("the holder's write before the forced release: %v", err)
				}
			}
			st, err := dial(t, srv).ForceRelease(ctx, k)
			if err != nil || st.Token <= old {
				t.Fatalf("ForceRelease = %+v, %v; want a floor above %d", st, err, old)
			}
			if last, err := same.Last(ctx, c, k); err != nil || last != st.Token {
				t.Fatalf("fence of %q after the forced release = %d, %v; want the floor %d", k, last, err, st.Token)
			}
			if err := write(same, k, old); !errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("the removed holder's late write to %q: %v, want ErrStaleToken", k, err)
			}
			if ok, err := b.Extend(ctx, k, "old", time.Minute); ok || err != nil { // gives up the advisory lock
				t.Fatalf("Extend by the removed holder = %v, %v", ok, err)
			}
			next, ok, err := b.Acquire(ctx, k, "next", time.Minute)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			if err := write(strict, k, next); err != nil {
				t.Fatalf("the next holder's write (token %d, fence %d): %v", next, st.Token, err)
			}
		}
	})

	t.Run("WithoutFenceTable", func(t *testing.T) {
		// In a database without turnstile_fences, the forced release
		// raises the lock's token alone.
		ctx := ctxFor(t, 30*time.Second)
		admin := sqlConn(t, srv)
		if _, err := admin.Exec(ctx, "CREATE DATABASE nofence"); err != nil {
			t.Fatal(err)
		}
		cfg := connConfig(t, srv)
		cfg.Database = "nofence"
		b := dialConfig(t, cfg)
		tok, ok, err := b.Acquire(ctx, "k", "old", time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		st, err := dialConfig(t, cfg).ForceRelease(ctx, "k")
		if err != nil || !st.Held || st.Token != tok+1 {
			t.Fatalf("ForceRelease = %+v, %v; want the holder removed, floor %d", st, err, tok+1)
		}
	})

	t.Run("Free", func(t *testing.T) { inspecttest.ForceNeverLocked(t, dial(t, srv)) })
	t.Run("Cancelled", func(t *testing.T) { inspecttest.Cancelled(t, dial(t, srv)) })
}
