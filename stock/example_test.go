package stock_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/stock"
)

// Three orders for two tickets: two are sold, the third is refused, and a
// cancelled order puts its ticket back.
func Example() {
	// A private redis-server for the example; use your own address.
	dir, err := os.MkdirTemp("", "stock-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	srv, err := redisproc.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Kill()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()

	tickets, err := stock.NewCounter(client, "stock:concert:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tickets.Set(ctx, 2); err != nil {
		fmt.Println(err)
		return
	}
	for order := 1; order <= 3; order++ {
		left, err := tickets.Take(ctx, 1)
		switch {
		case errors.Is(err, stock.ErrSoldOut):
			fmt.Printf("order %d: sold out\n", order)
		case err != nil:
			fmt.Printf("order %d: %v\n", order, err)
		default:
			fmt.Printf("order %d: ticket, %d left\n", order, left)
		}
	}
	left, err := tickets.Put(ctx, 1) // order 2 was cancelled
	fmt.Println("after a cancellation:", left, err)

	// The same sale over 4 shards: orders start at a random shard, and
	// Rebalance evens out what is left.
	seats, err := stock.NewSharded(client, "stock:concert:43", 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := seats.Set(ctx, 10); err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		if _, err := seats.Take(ctx, 2); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := seats.Rebalance(ctx); err != nil {
		fmt.Println(err)
		return
	}
	levels, err := seats.Levels(ctx)
	fmt.Println("seats per shard:", levels, err)
	// Output:
	// order 1: ticket, 1 left
	// order 2: ticket, 0 left
	// order 3: sold out
	// after a cancellation: 1 <nil>
	// seats per shard: [1 1 1 1] <nil>
}

// Stock kept in PostgreSQL next to the orders. An order that loses every
// compare-and-set gets ErrConflict and may simply be placed again.
func ExampleCAS() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if err := stock.Migrate(ctx, pool); err != nil {
		fmt.Println(err)
		return
	}
	inventory, err := stock.NewCAS(pool) // 3 retries, 10 ms ×2 backoff
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := inventory.Set(ctx, "sku:12345", 1000); err != nil {
		fmt.Println(err)
		return
	}
	for {
		left, err := inventory.Take(ctx, "sku:12345", 1)
		if errors.Is(err, stock.ErrConflict) {
			continue // busy row: place the order again
		}
		if errors.Is(err, stock.ErrSoldOut) {
			fmt.Println("sold out")
			return
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("sold; left:", left)
		return
	}
}
