package fence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/memory"
)

// Example is the GC-pause incident in one process: A's lease runs out
// while A is paused, B takes the lock and writes, and A's late write is
// refused.
func Example() {
	ctx := context.Background()
	locks := memory.New()
	a, _ := turnstile.New(locks, turnstile.WithTTL(200*time.Millisecond), turnstile.WithoutWatchdog())
	defer a.Close()
	b, _ := turnstile.New(locks)
	defer b.Close()

	stock := 10
	guard := fence.NewMemory()
	sell := func(token uint64) error {
		return guard.Do("inventory:12345", token, func() error { stock--; return nil })
	}

	leaseA, err := a.Acquire(ctx, "inventory:12345")
	if err != nil {
		fmt.Println(err)
		return
	}
	<-leaseA.Context().Done() // A is paused past its TTL: the lease is lost

	leaseB, err := b.Acquire(ctx, "inventory:12345")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer leaseB.Release(ctx)
	fmt.Println("B sells:", sell(leaseB.Token()))

	err = sell(leaseA.Token()) // A wakes up and writes
	fmt.Println("A sells:", err)
	fmt.Println(errors.Is(err, fence.ErrStaleToken), "stock:", stock)
	// Output:
	// B sells: <nil>
	// A sells: turnstile: stale fencing token 1 for "inventory:12345": storage already accepted 2
	// true stock: 9
}

// The check runs in the transaction that makes the business write: a stale
// token rolls both back.
func ExamplePostgres_Check() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal/shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if err := fence.Migrate(ctx, pool); err != nil {
		fmt.Println(err)
		return
	}
	guard, err := fence.NewPostgres()
	if err != nil {
		fmt.Println(err)
		return
	}

	locks, err := turnstile.Open(ctx, "mem://") // any backend: redis://, etcd://, ...
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close()

	err = turnstile.Do(ctx, locks, "inventory:12345", func(ctx context.Context, lease *turnstile.Lease) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := guard.Check(ctx, tx, "inventory:12345", lease.Token()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE stock SET n = n - 1 WHERE item = 12345")
			return err
		})
	})
	if errors.Is(err, fence.ErrStaleToken) {
		fmt.Println("lost the lock; a newer holder has written:", err)
	}
}

// Data keys built with DataKey share the resource's Redis Cluster slot, so
// the guard's script may write them.
func ExampleRedis_IncrBy() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	guard, err := fence.NewRedis(client)
	if err != nil {
		fmt.Println(err)
		return
	}

	locks, err := turnstile.Open(ctx, "mem://") // any backend: redis://, etcd://, ...
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close()

	var left int64
	err = turnstile.Do(ctx, locks, "inventory:12345", func(ctx context.Context, lease *turnstile.Lease) error {
		n, err := guard.IncrBy(ctx, "inventory:12345", lease.Token(), fence.DataKey("inventory:12345", "stock"), -1)
		left = n
		return err
	})
	if errors.Is(err, fence.ErrStaleToken) {
		fmt.Println("lost the lock; a newer holder has written:", err)
		return
	}
	fmt.Println("left:", left, err)
}
