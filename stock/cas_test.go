package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile/stock"
)

func newCAS(t testing.TB, pool *pgxpool.Pool, opts ...stock.CASOption) *stock.CAS {
	t.Helper()
	c, err := stock.NewCAS(pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The flash sale on a CAS row: 3,847 concurrent orders for 1,000 units over
// 16 connections, with the default retries and with none (every lost
// compare-and-set is then an ErrConflict). An order that gets ErrConflict
// is placed again, as a shopper would retry it. The row never reads below
// zero.
func TestCASFlashSale(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []stock.CASOption
	}{
		{"DefaultRetries", nil},
		{"NoRetries", []stock.CASOption{stock.WithRetries(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 60*time.Second)
			id := "sale:3:" + tc.name
			c := newCAS(t, pgPool(t, 16), tc.opts...)
			if err := c.Set(ctx, id, saleUnits); err != nil {
				t.Fatal(err)
			}
			watch := pgPool(t, 1)
			smp := startSampler(ctx, func(ctx context.Context) (int64, error) {
				var q int64
				err := watch.QueryRow(ctx, "SELECT quantity FROM turnstile_stock WHERE id = $1", id).Scan(&q)
				return q, err
			})
			s := runSale(saleOrders, func(int) error {
				_, err := c.Take(ctx, id, 1)
				return err
			})
			low := smp.finish(t)
			s.check(t, saleUnits, saleOrders)
			if low < 0 {
				t.Fatalf("the row read %d during the sale", low)
			}
			t.Logf("orders placed again after ErrConflict: %d; lowest level seen: %d over %d samples", s.conflicts, low, smp.samples)
			if left, err := c.Left(ctx, id); err != nil || left != 0 {
				t.Fatalf("Left = %d, %v; want 0", left, err)
			}
		})
	}
}

func TestCASTakePutLeft(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	pool := pgPool(t, 2)
	// The server outlives a test run (-count): start from no rows.
	if _, err := pool.Exec(ctx, "DELETE FROM turnstile_stock WHERE id LIKE 'tpl%'"); err != nil {
		t.Fatal(err)
	}
	c := newCAS(t, pool)
	if left, err := c.Left(ctx, "tpl:missing"); err != nil || left != 0 {
		t.Fatalf("Left of a missing row = %d, %v; want 0", left, err)
	}
	if _, err := c.Take(ctx, "tpl:missing", 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Take from a missing row: %v; want ErrSoldOut", err)
	}
	if err := c.Set(ctx, "tpl", 10); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Take(ctx, "tpl", 3); err != nil || left != 7 {
		t.Fatalf("Take(3) = %d, %v; want 7", left, err)
	}
	if left, err := c.Take(ctx, "tpl", 8); !errors.Is(err, stock.ErrSoldOut) || left != 7 {
		t.Fatalf("Take(8) = %d, %v; want 7, ErrSoldOut", left, err)
	}
	if left, err := c.Put(ctx, "tpl", 3); err != nil || left != 10 {
		t.Fatalf("Put(3) = %d, %v; want 10", left, err)
	}
	if left, err := c.Take(ctx, "tpl", 10); err != nil || left != 0 {
		t.Fatalf("Take(10) = %d, %v; want 0", left, err)
	}
	if left, err := c.Left(ctx, "tpl"); err != nil || left != 0 {
		t.Fatalf("Left = %d, %v; want 0", left, err)
	}
	if err := c.Set(ctx, "tpl", 4); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Left(ctx, "tpl"); err != nil || left != 4 {
		t.Fatalf("Left after Set(4) = %d, %v; want 4", left, err)
	}
	// Put creates a missing row.
	if left, err := c.Put(ctx, "tpl:new", 2); err != nil || left != 2 {
		t.Fatalf("Put(2) on a missing row = %d, %v; want 2", left, err)
	}
}

// The table refuses a negative quantity whatever writes to it.
func TestCASTableRefusesNegative(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	pool := pgPool(t, 1)
	c := newCAS(t, pool)
	if err := c.Set(ctx, "neg", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE turnstile_stock SET quantity = quantity - 2 WHERE id = 'neg'"); err == nil {
		t.Fatal("an UPDATE to -1 succeeded")
	}
}

// A compare-and-set that loses to a concurrent update: the update holds
// the row while Take has read it; when the update commits, Take's UPDATE
// finds the version changed. With no retries that is ErrConflict; with
// one, Take reads again and succeeds.
func TestCASConflict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
		want    error
		left    int64
	}{
		{"NoRetry", 0, stock.ErrConflict, 8},
		{"OneRetry", 1, nil, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 20*time.Second)
			id := "conflict:" + tc.name
			c := newCAS(t, pgPool(t, 2), stock.WithRetries(tc.retries), stock.WithBackoff(time.Millisecond))
			if err := c.Set(ctx, id, 10); err != nil {
				t.Fatal(err)
			}
			// Another buyer's update, not yet committed: readers still see
			// version 1 and 10 units.
			other, tx := uncommitted(t, ctx, "UPDATE turnstile_stock SET quantity = quantity - 2, version = version + 1 WHERE id = $1", id)
			var (
				wg   sync.WaitGroup
				left int64
				terr error
			)
			wg.Go(func() { left, terr = c.Take(ctx, id, 1) })
			waitForBlockedUpdate(t, ctx, other)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if !errors.Is(terr, tc.want) {
				t.Fatalf("Take = %v; want %v", terr, tc.want)
			}
			if got, err := c.Left(ctx, id); err != nil || got != tc.left {
				t.Fatalf("Left = %d, %v; want %d", got, err, tc.left)
			}
			if tc.want == nil && left != tc.left {
				t.Fatalf("Take returned left %d; want %d", left, tc.left)
			}
		})
	}
}

// uncommitted runs update with id in a transaction on a pool of its own,
// and returns the pool and the transaction, still open; it is rolled back
// when the test ends unless committed.
func uncommitted(t *testing.T, ctx context.Context, update, id string) (*pgxpool.Pool, pgx.Tx) {
	t.Helper()
	other := pgPool(t, 2)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, update, id); err != nil {
		t.Fatal(err)
	}
	return other, tx
}

// waitForBlockedUpdate returns once a compare-and-set is waiting for a row
// lock.
func waitForBlockedUpdate(t *testing.T, ctx context.Context, db *pgxpool.Pool) {
	t.Helper()
	const q = `SELECT count(*) FROM pg_stat_activity
	            WHERE wait_event_type = 'Lock' AND query LIKE '%SET quantity = quantity - $3%'`
	for {
		var n int
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("waiting for the blocked update: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the compare-and-set never waited for the row lock")
		case <-time.After(time.Millisecond):
		}
	}
}

// A Take whose context ends while its compare-and-set waits for the row
// returns the context's error and takes nothing.
func TestCASCancelled(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	id := "conflict:cancel"
	c := newCAS(t, pgPool(t, 2))
	if err := c.Set(ctx, id, 10); err != nil {
		t.Fatal(err)
	}
	other, tx := uncommitted(t, ctx, "UPDATE turnstile_stock SET version = version + 1 WHERE id = $1", id)
	takeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		terr error
	)
	wg.Go(func() { _, terr = c.Take(takeCtx, id, 1) })
	waitForBlockedUpdate(t, ctx, other)
	cancel()
	wg.Wait()
	if !errors.Is(terr, context.Canceled) {
		t.Fatalf("Take = %v; want context.Canceled", terr)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Left(ctx, id); err != nil || got != 10 {
		t.Fatalf("Left = %d, %v; want 10", got, err)
	}
}

// Migrate is idempotent and safe from several sessions at once, on a
// database that has no table yet.
func TestMigrateConcurrent(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	admin := pgPool(t, 1)
	for _, q := range []string{"DROP DATABASE IF EXISTS stock_migrate", "CREATE DATABASE stock_migrate"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgx.ParseConfig(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "stock_migrate"
	conns := make([]*pgx.Conn, 8)
	for i := range conns {
		if conns[i], err = pgx.ConnectConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conns[i].Close(context.Background()) }()
	}
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() { errs[i] = stock.Migrate(ctx, conn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	if err := stock.Migrate(ctx, conns[0]); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	var n int
	if err := conns[0].QueryRow(ctx, "SELECT count(*) FROM turnstile_stock").Scan(&n); err != nil || n != 0 {
		t.Fatalf("count = %d, %v", n, err)
	}
}
