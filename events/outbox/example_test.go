package outbox_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/outbox"
)

// An order is assigned under a lock, and the audit event of the lease is
// written in the same transaction as the assignment: it is published (by
// the relay) if and only if the assignment commits.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal/orders")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	kafka, err := events.NewKafka([]string{"kafka1:9092", "kafka2:9092"})
	if err != nil {
		log.Fatal(err)
	}
	defer kafka.Close()
	relay, err := outbox.NewRelay(pool, kafka)
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = relay.Run(ctx) }()

	c, err := turnstile.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = turnstile.Do(ctx, c, "lock:order:42", func(ctx context.Context, l *turnstile.Lease) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		// The change, fenced by the lease's token.
		if _, err := tx.Exec(ctx, `UPDATE orders SET rider = 7, fence = $1 WHERE id = 42 AND fence < $1`, l.Token()); err != nil {
			return err
		}
		ev := events.New(events.TypeReleased, l.Key())
		ev.Owner, ev.Token = l.Owner(), l.Token()
		if err := outbox.Add(ctx, tx, ev); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
}
