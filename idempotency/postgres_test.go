package idempotency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/idempotency"
)

func TestMigrateConcurrently(t *testing.T) {
	pool := newPool(t)
	ctx := ctxFor(t, 20*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- idempotency.Migrate(ctx, pool) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Migrate: %v", err)
		}
	}
}

func TestPostgresPurge(t *testing.T) {
	pool := newPool(t)
	ctx := ctxFor(t, 20*time.Second)
	const retention = 50 * time.Millisecond
	short, err := idempotency.NewPostgres(pool, idempotency.WithRetention(retention))
	if err != nil {
		t.Fatal(err)
	}
	long, err := idempotency.NewPostgres(pool)
	if err != nil {
		t.Fatal(err)
	}
	expiring, kept := key(t, "expiring"), key(t, "kept")
	if _, _, err := short.Do(ctx, expiring, ok); err != nil {
		t.Fatal(err)
	}
	if _, _, err := long.Do(ctx, kept, ok); err != nil {
		t.Fatal(err)
	}
	rows := func(key string) int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM turnstile_idempotency WHERE key = $1`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(retention + 100*time.Millisecond) // let the short result expire
	if rows(expiring) != 1 {
		t.Fatal("the expired row is gone before Purge")
	}
	n, err := short.Purge(ctx)
	if err != nil || n < 1 {
		t.Errorf("Purge = %d, %v; want at least 1 row deleted", n, err)
	}
	if rows(expiring) != 0 {
		t.Error("Purge kept the expired result")
	}
	if rows(kept) != 1 {
		t.Error("Purge deleted a result within its retention")
	}
	// The kept result still replays.
	if r, rep, err := long.Do(ctx, kept, func(context.Context) ([]byte, error) { return []byte("again"), nil }); err != nil || !rep || string(r) != "ok" {
		t.Errorf("Do after Purge = (%q, %v, %v), want (ok, true, nil)", r, rep, err)
	}
}
