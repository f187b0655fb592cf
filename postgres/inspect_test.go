package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/postgres"
)

func TestInspect(t *testing.T) {
	b := dial(t, srv)

	t.Run("Free", func(t *testing.T) {
		st, err := b.Inspect(ctxFor(t, 10*time.Second), "inspect-never")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Waiters != -1 || st.Token != 0 || st.Key != "inspect-never" {
			t.Fatalf("Inspect of a key never locked = %+v, %v; want free, token 0, waiters -1", st, err)
		}
	})

	t.Run("HeldThenReleased", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		const k = "inspect-held"
		tok, ok, err := b.Acquire(ctx, k, "alice", 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		st, err := dial(t, srv).Inspect(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		h := st.Holders
		if !st.Held || len(h) != 1 || h[0].Owner != "alice" || h[0].Token != tok || st.Token != tok || st.Waiters != -1 {
			t.Fatalf("Inspect of a held key = %+v; want alice with token %d, waiters -1", st, tok)
		}
		if h[0].TTL <= 0 || h[0].TTL > 10*time.Second {
			t.Fatalf("TTL left = %v, want in (0, 10s]", h[0].TTL)
		}
		if ok, err := b.Release(ctx, k, "alice"); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		// The row stays, and with it the last token issued.
		if st, err := b.Inspect(ctx, k); err != nil || st.Held || len(st.Holders) != 0 || st.Token != tok {
			t.Fatalf("Inspect after release = %+v, %v; want free with token %d", st, err, tok)
		}
	})

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		toks := map[string]uint64{}
		for _, k := range []string{"ls/a", "ls/b", "ls/c", "ls/ü", "ls/\U0010FFFF", "ls0", "lsx", "other", "ls_%"} {
			tok, ok, err := b.Acquire(ctx, k, "owner-"+k, 10*time.Second)
			if err != nil || !ok {
				t.Fatalf("Acquire %q = %v, %v", k, ok, err)
			}
			toks[k] = tok
		}
		// Released and expired rows stay in the table; they are not listed.
		if _, ok, err := b.Acquire(ctx, "ls/released", "x", 10*time.Second); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := b.Release(ctx, "ls/released", "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, ok, err := b.Acquire(ctx, "ls/expired", "x", 20*time.Millisecond); !ok || err != nil {
			t.Fatal(ok, err)
		}
		time.Sleep(100 * time.Millisecond)

		want := []string{"ls/a", "ls/b", "ls/c", "ls/ü", "ls/\U0010FFFF"}
		all, more, err := b.List(ctx, "ls/", 10)
		if err != nil || more || len(all) != len(want) {
			t.Fatalf("List(ls/, 10) = %+v, more=%v, %v; want %q, no more", all, more, err, want)
		}
		for i, k := range want {
			st := all[i]
			if st.Key != k || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "owner-"+k || st.Holders[0].Token != toks[k] ||
				st.Token != toks[k] || st.Holders[0].TTL <= 0 || st.Holders[0].TTL > 10*time.Second || st.Waiters != -1 {
				t.Fatalf("List entry %d = %+v; want %q held by owner-%s with token %d", i, st, k, k, toks[k])
			}
		}
		page, more, err := b.List(ctx, "ls/", 2)
		if err != nil || !more || len(page) != 2 || page[0].Key != "ls/a" || page[1].Key != "ls/b" {
			t.Fatalf("List(ls/, 2) = %+v, more=%v, %v; want ls/a, ls/b and more", page, more, err)
		}
		if page, more, err := b.List(ctx, "ls/", 5); err != nil || more || len(page) != 5 {
			t.Fatalf("List(ls/, 5) of 5 = %d states, more=%v, %v; want 5, no more", len(page), more, err)
		}
		for prefix, n := range map[string]int{"ls": 8, "ls_": 1, "ls_%": 1, "ls/\U0010FFFF": 1, "ls/ü": 1, "nothing-here/": 0} {
			got, more, err := b.List(ctx, prefix, 100)
			if err != nil || more || len(got) != n {
				t.Fatalf("List(%q, 100) = %+v, more=%v, %v; want %d", prefix, got, more, err, n)
			}
			for _, st := range got {
				if !strings.HasPrefix(st.Key, prefix) {
					t.Fatalf("List(%q) returned %q", prefix, st.Key)
				}
			}
		}
		if got, _, err := b.List(ctx, "", 1000); err != nil || len(got) < 9 {
			t.Fatalf("List of every key = %d states, %v; want at least the 9 held here", len(got), err)
		}
		for _, limit := range []int{0, -1} {
			if _, _, err := b.List(ctx, "ls/", limit); !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "limit") {
				t.Fatalf("List with limit %d: %v, want an error about the limit", limit, err)
			}
		}
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
		ctx := ctxFor(t, 30*time.Second)
		b := dial(t, srv)
		const k = "force-own"
		tok, ok, err := b.Acquire(ctx, k, "stuck", time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		other := dial(t, srv)
		if _, ok, err := other.Acquire(ctx, k, "next", time.Minute); ok || err != nil {
			t.Fatalf("Acquire of a held key = %v, %v", ok, err)
		}
		st, err := b.ForceRelease(ctx, k)
		if err != nil || !st.Held || st.Holders[0].Owner != "stuck" || st.Holders[0].Token != tok {
			t.Fatalf("ForceRelease = %+v, %v", st, err)
		}
		next, ok, err := other.Acquire(ctx, k, "next", time.Minute)
		if err != nil || !ok || next <= st.Token {
			t.Fatalf("Acquire right after the forced release = %d, %v, %v; want a token above %d", next, ok, err, st.Token)
		}
		if ok, err := b.Extend(ctx, k, "stuck", time.Minute); ok || err != nil {
			t.Fatalf("Extend by the removed holder = %v, %v; want false", ok, err)
		}
		if ok, err := b.Release(ctx, k, "stuck"); ok || err != nil {
			t.Fatalf("Release by the removed holder = %v, %v; want false", ok, err)
		}
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

	t.Run("Free", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		b := dial(t, srv)
		st, err := b.ForceRelease(ctx, "force-never")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Token != 0 {
			t.Fatalf("ForceRelease of a key never locked = %+v, %v; want not held, token 0", st, err)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		b := dial(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := b.ForceRelease(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("ForceRelease with a cancelled context: %v", err)
		}
		if _, err := b.Inspect(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Inspect with a cancelled context: %v", err)
		}
		if _, _, err := b.List(ctx, "", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("List with a cancelled context: %v", err)
		}
	})
}
