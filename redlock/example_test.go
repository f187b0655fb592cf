package redlock_test

import (
	"context"
	"fmt"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// A Redlock of three stores: the lock is held on a majority of them, and
// its token keeps growing when the majority changes. In-process stores
// stand in for Redis servers here.
func Example() {
	ctx := context.Background()
	stores := []*memory.Backend{memory.New(), memory.New(), memory.New()}
	b, err := redlock.New([]driver.Backend{stores[0], stores[1], stores[2]}, redlock.WithWaitAll())
	if err != nil {
		panic(err)
	}
	defer b.Close()
	c, err := turnstile.New(b)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	first, err := c.TryAcquire(ctx, "lock:inventory:12345")
	if err != nil {
		panic(err)
	}
	_, err = c.TryAcquire(ctx, "lock:inventory:12345")
	fmt.Println("second holder refused:", err != nil)

	stores[0].Evict("lock:inventory:12345") // one store loses the lock: a majority still holds it
	fmt.Println("still held:", first.Context().Err() == nil)
	if err := first.Release(ctx); err != nil {
		panic(err)
	}

	next, err := c.TryAcquire(ctx, "lock:inventory:12345")
	if err != nil {
		panic(err)
	}
	defer next.Release(ctx)
	fmt.Println("next token is larger:", next.Token() > first.Token())
	fmt.Println("quorum:", b.Quorum(), "of 3")
	// Output:
	// second holder refused: true
	// still held: true
	// next token is larger: true
	// quorum: 2 of 3
}
