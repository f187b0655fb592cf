package fence_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile/fence"
)

// The connections the guard's doc says it takes.
var (
	_ fence.Querier = pgx.Tx(nil)
	_ fence.Querier = (*pgx.Conn)(nil)
	_ fence.Querier = (*pgxpool.Pool)(nil)
	_ fence.Querier = (*pgxpool.Conn)(nil)
)

func newPostgres(t testing.TB, opts ...fence.Option) *fence.Postgres {
	t.Helper()
	g, err := fence.NewPostgres(opts...)
	if err != nil {
		t.Fatalf("NewPostgres: %v", err)
	}
	return g
}

// businessTable creates a table of the test's own that stands for the data
// a lock protects: one row per item, with the token of its last writer.
// It forgets resource's last token too, so that the test starts afresh
// when run again (go test -count) on the package's one server.
func businessTable(t testing.TB, p *pgxpool.Pool, name, resource string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	if _, err := p.Exec(ctx, "DELETE FROM turnstile_fences WHERE resource = $1", resource); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "CREATE TABLE "+name+" (id text PRIMARY KEY, stock int NOT NULL, writer bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "INSERT INTO "+name+" VALUES ('item', 10, 0)"); err != nil {
		t.Fatal(err)
	}
}

// row reads the business row.
func row(t testing.TB, p *pgxpool.Pool, table string) (stock int, writer uint64) {
	t.Helper()
	if err := p.QueryRow(ctxFor(t, 10*time.Second), "SELECT stock, writer FROM "+table+" WHERE id = 'item'").Scan(&stock, &writer); err != nil {
		t.Fatal(err)
	}
	return stock, writer
}

// sell is the business write: one item sold by the writer of token.
func sell(ctx context.Context, tx pgx.Tx, table string, token uint64) error {
	_, err := tx.Exec(ctx, "UPDATE "+table+" SET stock = stock - 1, writer = $1 WHERE id = 'item'", int64(token))
	return err
}

// checkAndSell is the whole transaction of a writer: the guard's check,
// then the business write.
func checkAndSell(ctx context.Context, p *pgxpool.Pool, g *fence.Postgres, resource, table string, token uint64) error {
	return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
		if err := g.Check(ctx, tx, resource, token); err != nil {
			return err
		}
		return sell(ctx, tx, table, token)
	})
}

// pgCase returns a pool, a context of 30 s and a guard with opts, for a
// test of resource r over its own business table.
func pgCase(t *testing.T, r, table string, opts ...fence.Option) (*pgxpool.Pool, context.Context, *fence.Postgres) {
	t.Helper()
	p := pool(t)
	businessTable(t, p, table, r)
	return p, ctxFor(t, 30*time.Second), newPostgres(t, opts...)
}

func TestPostgresTokens(t *testing.T) {
	const r, table = "pg:tokens", "biz_tokens"
	p, ctx, g := pgCase(t, r, table)

	if last, err := g.Last(ctx, p, r); err != nil || last != 0 {
		t.Fatalf("Last before any write = %d, %v; want 0", last, err)
	}
	if err := checkAndSell(ctx, p, g, r, table, 43); err != nil {
		t.Fatalf("first write: %v", err)
	}
	wantStale(t, checkAndSell(ctx, p, g, r, table, 42), r, 42, 43)
	wantStale(t, checkAndSell(ctx, p, g, r, table, 43), r, 43, 43)
	if stock, writer := row(t, p, table); stock != 9 || writer != 43 {
		t.Fatalf("after stale writes: stock %d writer %d, want 9 and 43", stock, writer)
	}
	if err := checkAndSell(ctx, p, g, r, table, 44); err != nil {
		t.Fatalf("larger token: %v", err)
	}
	if stock, writer := row(t, p, table); stock != 8 || writer != 44 {
		t.Fatalf("stock %d writer %d, want 8 and 44", stock, writer)
	}
	if last, err := g.Last(ctx, p, r); err != nil || last != 44 {
		t.Fatalf("Last = %d, %v; want 44", last, err)
	}
	// The largest token PostgreSQL can hold.
	if err := checkAndSell(ctx, p, g, r, table, math.MaxInt64); err != nil {
		t.Fatalf("token MaxInt64: %v", err)
	}
	if last, err := g.Last(ctx, p, r); err != nil || last != math.MaxInt64 {
		t.Fatalf("Last = %d, %v; want MaxInt64", last, err)
	}
}

func TestPostgresAllowSameToken(t *testing.T) {
	const r, table = "pg:same", "biz_same"
	p, ctx, g := pgCase(t, r, table, fence.AllowSameToken())
	for range 3 {
		if err := checkAndSell(ctx, p, g, r, table, 7); err != nil {
			t.Fatalf("same token: %v", err)
		}
	}
	wantStale(t, checkAndSell(ctx, p, g, r, table, 6), r, 6, 7)
	if stock, writer := row(t, p, table); stock != 7 || writer != 7 {
		t.Fatalf("stock %d writer %d, want 7 and 7", stock, writer)
	}
}

// TestPostgresStaleRollsBackBusinessWrite: the business write made in the
// transaction, before or after the check, is never stored — even when the
// caller ignores the error and commits.
func TestPostgresStaleRollsBackBusinessWrite(t *testing.T) {
	const r, table = "pg:rollback", "biz_rollback"
	p, ctx, g := pgCase(t, r, table)
	if err := checkAndSell(ctx, p, g, r, table, 43); err != nil {
		t.Fatal(err)
	}

	t.Run("write before check, commit anyway", func(t *testing.T) {
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := sell(ctx, tx, table, 42); err != nil {
			t.Fatal(err)
		}
		wantStale(t, g.Check(ctx, tx, r, 42), r, 42, 43)
		if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
			t.Fatalf("Commit after a stale check: %v, want pgx.ErrTxCommitRollback", err)
		}
	})
	t.Run("check before write, in BeginFunc", func(t *testing.T) {
		wantStale(t, checkAndSell(ctx, p, g, r, table, 41), r, 41, 43)
	})
	if stock, writer := row(t, p, table); stock != 9 || writer != 43 {
		t.Fatalf("stock %d writer %d, want 9 and 43: a stale write was stored", stock, writer)
	}
	if last, err := g.Last(ctx, p, r); err != nil || last != 43 {
		t.Fatalf("Last = %d, %v; want 43", last, err)
	}
}

// TestPostgresConcurrentTransactions: writers 42 and 43 whose transactions
// overlap end with 43's write whichever checks first. The second one's
// check waits for the first transaction; the test sees it waiting before
// it lets the first commit.
func TestPostgresConcurrentTransactions(t *testing.T) {
	p := pool(t)
	g := newPostgres(t)
	for _, tc := range []struct {
		name          string
		first, second uint64
	}{
		{"42 commits first", 42, 43},
		{"43 commits first", 43, 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			r, table := "pg:concurrent:"+tc.name, "biz_concurrent"
			businessTable(t, p, table, r)

			first, err := p.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = first.Rollback(ctx) }()
			if err := g.Check(ctx, first, r, tc.first); err != nil {
				t.Fatalf("check %d: %v", tc.first, err)
			}
			if err := sell(ctx, first, table, tc.first); err != nil {
				t.Fatal(err)
			}

			conn, err := p.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			pid := conn.Conn().PgConn().PID()
			done := make(chan error, 1)
			go func() {
				done <- pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if err := g.Check(ctx, tx, r, tc.second); err != nil {
						return err
					}
					return sell(ctx, tx, table, tc.second)
				})
			}()
			waitForLockWait(t, p, pid)
			if err := first.Commit(ctx); err != nil {
				t.Fatalf("commit %d: %v", tc.first, err)
			}
			err = <-done
			if tc.second > tc.first {
				if err != nil {
					t.Fatalf("transaction %d: %v", tc.second, err)
				}
			} else {
				wantStale(t, err, r, tc.second, tc.first)
			}

			wantStock := 10 - 1
			if tc.second > tc.first {
				wantStock = 10 - 2 // both were valid when they committed
			}
			if stock, writer := row(t, p, table); stock != wantStock || writer != 43 {
				t.Fatalf("stock %d writer %d, want %d and 43", stock, writer, wantStock)
			}
		})
	}
}

// waitForLockWait waits until the backend pid waits for a lock.
func waitForLockWait(t testing.TB, p *pgxpool.Pool, pid uint32) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	for {
		var waiting bool
		err := p.QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting)
		if err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if waiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the second transaction never waited for the first one's row lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestPostgresRandomWriters: many transactions with random tokens; the
// business row ends with the largest token's write.
func TestPostgresRandomWriters(t *testing.T) {
	const r, table = "pg:random", "biz_random"
	p, ctx, g := pgCase(t, r, table)

	const writers = 24
	tokens := rand.Perm(1000)[:writers]
	maxTok := uint64(0)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		tok := uint64(tok + 1)
		maxTok = max(maxTok, tok)
		wg.Go(func() { errs[i] = checkAndSell(ctx, p, g, r, table, tok) })
	}
	wg.Wait()
	sold := 0
	for _, err := range errs {
		switch {
		case err == nil:
			sold++
		case !errors.Is(err, fence.ErrStaleToken):
			t.Fatalf("writer: %v", err)
		}
	}
	stock, writer := row(t, p, table)
	if writer != maxTok || stock != 10-sold {
		t.Fatalf("stock %d writer %d, want %d and %d (%d writes accepted)", stock, writer, 10-sold, maxTok, sold)
	}
	if last, err := g.Last(ctx, p, r); err != nil || last != maxTok {
		t.Fatalf("Last = %d, %v; want %d", last, err, maxTok)
	}
}

func TestPostgresMigrate(t *testing.T) {
	p := pool(t) // migrated once already
	ctx := ctxFor(t, 30*time.Second)
	if err := fence.Migrate(ctx, p); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}

	t.Run("concurrently", func(t *testing.T) {
		dropTable(t, p, "fence_concurrent")
		g := newPostgres(t, fence.WithTable("fence_concurrent"))
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = g.Migrate(ctx, p) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	})

	t.Run("inside a transaction", func(t *testing.T) {
		dropTable(t, p, "fence_in_tx")
		g := newPostgres(t, fence.WithTable("fence_in_tx"))
		err := pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			if err := g.Migrate(ctx, tx); err != nil {
				return err
			}
			return g.Check(ctx, tx, "r", 1)
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	for _, table := range []string{"fence_custom", "order", "fence_schema.fences"} {
		t.Run("WithTable "+table, func(t *testing.T) {
			if _, err := p.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS fence_schema"); err != nil {
				t.Fatal(err)
			}
			dropTable(t, p, table)
			g := newPostgres(t, fence.WithTable(table))
			if err := g.Check(ctx, p, "r", 1); err == nil || !strings.Contains(err.Error(), "Migrate") {
				t.Fatalf("Check before Migrate: %v, want an error that points at Migrate", err)
			}
			if err := g.Migrate(ctx, p); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if err := g.Check(ctx, p, "r", 5); err != nil {
				t.Fatalf("Check: %v", err)
			}
			wantStale(t, g.Check(ctx, p, "r", 4), "r", 4, 5)
			if last, err := g.Last(ctx, p, "r"); err != nil || last != 5 {
				t.Fatalf("Last = %d, %v; want 5", last, err)
			}
			// The default table knows nothing of it.
			if last, err := newPostgres(t).Last(ctx, p, "r"); err != nil || last != 0 {
				t.Fatalf("Last in the default table = %d, %v; want 0", last, err)
			}
		})
	}
}

// dropTable drops a table a test creates, left over from an earlier run.
func dropTable(t testing.TB, p *pgxpool.Pool, table string) {
	t.Helper()
	name := pgx.Identifier(strings.Split(table, ".")).Sanitize()
	if _, err := p.Exec(ctxFor(t, 10*time.Second), "DROP TABLE IF EXISTS "+name); err != nil {
		t.Fatal(err)
	}
}
