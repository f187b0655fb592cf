package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/idempotency"
	"github.com/turnstilelock/turnstile/memory"
)

// A payment handler that charges once per request id, however often the
// client retries.
func Example() {
	store := idempotency.NewMemory() // NewRedis or NewPostgres across instances
	ctx := context.Background()
	charges := 0
	charge := func(ctx context.Context) ([]byte, error) {
		charges++
		return []byte("receipt-0001"), nil
	}

	receipt, replayed, err := store.Do(ctx, "payment:req-7f3a", charge)
	fmt.Println(string(receipt), replayed, err)

	// The client timed out and sends the same request again.
	receipt, replayed, err = store.Do(ctx, "payment:req-7f3a", charge)
	fmt.Println(string(receipt), replayed, err)
	fmt.Println("charges:", charges)
	// Output:
	// receipt-0001 false <nil>
	// receipt-0001 true <nil>
	// charges: 1
}

// A duplicate that arrives while the first call runs is told so, or
// waits for its result.
func Example_inProgress() {
	store := idempotency.NewMemory()
	ctx := context.Background()
	running, finish := make(chan struct{}), make(chan struct{})
	first := make(chan string)
	go func() {
		r, _, _ := store.Do(ctx, "payment:req-9c21", func(context.Context) ([]byte, error) {
			close(running)
			<-finish
			return []byte("receipt-0002"), nil
		})
		first <- string(r)
	}()
	<-running

	_, _, err := store.Do(ctx, "payment:req-9c21", func(context.Context) ([]byte, error) { return nil, nil })
	fmt.Println(errors.Is(err, idempotency.ErrInProgress))

	close(finish)
	fmt.Println(<-first)
	// Output:
	// true
	// receipt-0002
}

// Payments need both: the request id makes a retry of one payment safe,
// the lock on the account serialises different payments from it.
func Example_withLock() {
	ctx := context.Background()
	locks, err := turnstile.New(memory.New()) // redis, postgres, ... across processes
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	requests := idempotency.NewMemory()
	balance := 100

	pay := func(requestID string, amount int) string {
		receipt, _, err := requests.Do(ctx, "payment:"+requestID, func(ctx context.Context) ([]byte, error) {
			var receipt []byte
			err := turnstile.Do(ctx, locks, "lock:account:42", func(ctx context.Context, l *turnstile.Lease) error {
				if balance < amount {
					return errors.New("insufficient funds")
				}
				balance -= amount
				receipt = fmt.Appendf(nil, "paid %d, balance %d", amount, balance)
				return nil
			})
			return receipt, err
		})
		if err != nil {
			return err.Error()
		}
		return string(receipt)
	}

	fmt.Println(pay("req-1", 30))
	fmt.Println(pay("req-1", 30)) // the retry: no second debit
	fmt.Println(pay("req-2", 50))
	fmt.Println(pay("req-3", 50))
	// Output:
	// paid 30, balance 70
	// paid 30, balance 70
	// paid 50, balance 20
	// insufficient funds
}

func ExampleNewRedis() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := idempotency.NewRedis(client, idempotency.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	receipt, replayed, err := store.Do(context.Background(), "payment:req-7f3a", func(ctx context.Context) ([]byte, error) {
		return []byte("receipt-0001"), nil
	})
	fmt.Println(string(receipt), replayed, err)
}

func ExampleNewPostgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := idempotency.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	store, err := idempotency.NewPostgres(pool, idempotency.WithRetention(72*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	// Expired rows count as absent; delete them now and then.
	go func() {
		for range time.Tick(10 * time.Minute) {
			if _, err := store.Purge(ctx); err != nil {
				log.Print(err)
			}
		}
	}()
	receipt, replayed, err := store.Do(ctx, "payment:req-7f3a", func(ctx context.Context) ([]byte, error) {
		return []byte("receipt-0001"), nil
	})
	fmt.Println(string(receipt), replayed, err)
}
