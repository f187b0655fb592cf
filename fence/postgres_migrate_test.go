package fence_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile/fence"
)

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
