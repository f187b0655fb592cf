package outbox_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/outbox"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestMigrateConcurrent: migrations started together all succeed, and
// running one again changes nothing.
func TestMigrateConcurrent(t *testing.T) {
	_, pool := createDB(t)
	ctx := ctxFor(t, 20*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- outbox.Migrate(ctx, pool) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := outbox.Add(ctx, pool, events.New(events.TypeLost, "lock:a")); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.Pending(ctx, pool); n != 1 || err != nil {
		t.Fatalf("Pending after a second Migrate = %d, %v; want 1", n, err)
	}
}

// TestAddTransaction: an event added in a transaction is in the outbox if
// and only if the transaction commits.
func TestAddTransaction(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 10*time.Second)
	ev := events.New(events.TypeReleased, "lock:order:42")

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Add(ctx, tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.Pending(ctx, pool); n != 0 || err != nil {
		t.Fatalf("Pending after rollback = %d, %v; want 0", n, err)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Add(ctx, tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Add(ctx, tx, ev); err != nil {
		t.Fatalf("adding the same event again: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.Pending(ctx, pool); n != 1 || err != nil {
		t.Fatalf("Pending after commit = %d, %v; want 1", n, err)
	}

	var mp memPublisher
	r, err := outbox.NewRelay(pool, &mp)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if got := mp.evs[0]; got.ID != ev.ID || got.Key != ev.Key || !got.Timestamp.Equal(ev.Timestamp) {
		t.Fatalf("relayed %+v, want %+v", got, ev)
	}
	if n, err := r.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("second RunOnce = %d, %v; want 0 (already sent)", n, err)
	}
}

func TestAddInvalid(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 10*time.Second)
	bad := events.New(events.TypeAcquired, "")
	if err := outbox.Add(ctx, pool, bad); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("Add of an event without key = %v, want ErrInvalidEvent", err)
	}
	nul := events.New(events.TypeAcquired, "lock:\x00")
	if err := outbox.Add(ctx, pool, nul); !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), `field "key"`) {
		t.Fatalf("Add of a key with a NUL byte = %v, want ErrInvalidEvent naming field \"key\"", err)
	}
	var nilPool *pgxpool.Pool
	for name, q := range map[string]outbox.Querier{"nil": nil, "typed nil": nilPool} {
		if err := outbox.Add(ctx, q, events.New(events.TypeLost, "k")); !errors.Is(err, outbox.ErrNilDB) {
			t.Fatalf("Add with %s db = %v, want ErrNilDB", name, err)
		}
		if err := outbox.Migrate(ctx, q); !errors.Is(err, outbox.ErrNilDB) {
			t.Fatalf("Migrate with %s db = %v, want ErrNilDB", name, err)
		}
		if _, err := outbox.Pending(ctx, q); !errors.Is(err, outbox.ErrNilDB) {
			t.Fatalf("Pending with %s db = %v, want ErrNilDB", name, err)
		}
		if _, err := outbox.Purge(ctx, q, time.Now()); !errors.Is(err, outbox.ErrNilDB) {
			t.Fatalf("Purge with %s db = %v, want ErrNilDB", name, err)
		}
	}
	if n, err := outbox.Pending(ctx, pool); n != 0 || err != nil {
		t.Fatalf("Pending = %d, %v; want 0", n, err)
	}
}

// TestPurge deletes sent rows only.
func TestPurge(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 10*time.Second)
	fill(t, pool, 4, 1)
	r, err := outbox.NewRelay(pool, &memPublisher{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); n != 4 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	fill(t, pool, 3, 1)
	n, err := outbox.Purge(ctx, pool, time.Now().Add(time.Minute))
	if n != 4 || err != nil {
		t.Fatalf("Purge = %d, %v; want 4", n, err)
	}
	if n, err := outbox.Pending(ctx, pool); n != 3 || err != nil {
		t.Fatalf("Pending after Purge = %d, %v; want 3", n, err)
	}
}
