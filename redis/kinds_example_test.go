package redis_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redis"
)

// A job that calls itself on the same resource takes the lock again
// under its fixed owner id, and frees it with its last release.
func ExampleReentrant() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	reentrant, err := turnstile.Reentrant(b)
	if err != nil {
		log.Fatal(err)
	}
	c, err := turnstile.New(reentrant, turnstile.WithOwner("invoice-run-2024-06"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	outer, err := c.Acquire(ctx, "lock:invoice:991")
	if err != nil {
		log.Fatal(err)
	}
	inner, err := c.Acquire(ctx, "lock:invoice:991") // no wait: this owner holds it
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inner.Token() == outer.Token())
	_ = inner.Release(ctx) // still held
	_ = outer.Release(ctx) // free
}

// Readers of a price list share it; a writer updating it waits for the
// readers inside and keeps new ones out meanwhile.
func ExampleReadLock() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	read, write, err := turnstile.ReadWrite(b)
	if err != nil {
		log.Fatal(err)
	}
	readers, err := turnstile.New(read)
	if err != nil {
		log.Fatal(err)
	}
	defer readers.Close()
	writers, err := turnstile.New(write)
	if err != nil {
		log.Fatal(err)
	}
	defer writers.Close()

	err = turnstile.Do(ctx, readers, "lock:prices:eu", func(ctx context.Context, l *turnstile.Lease) error {
		return nil // read the price list
	})
	if err != nil {
		log.Fatal(err)
	}
	err = turnstile.Do(ctx, writers, "lock:prices:eu", func(ctx context.Context, l *turnstile.Lease) error {
		return nil // write it, passing l.Token() to the store
	})
	if err != nil {
		log.Fatal(err)
	}
}

// At most three exports run at once across every instance.
func ExampleSemaphore() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	sem, err := turnstile.Semaphore(b, 3)
	if err != nil {
		log.Fatal(err)
	}
	c, err := turnstile.New(sem)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = turnstile.Do(ctx, c, "exports", func(ctx context.Context, l *turnstile.Lease) error {
		return nil // one of at most three exports
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Buyers of a sold-out drop wait in line, in order, and are told their
// place.
func ExampleFair() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fair, err := turnstile.Fair(b)
	if err != nil {
		log.Fatal(err)
	}
	c, err := turnstile.New(fair)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.Acquire(ctx, "lock:drop:sneaker-77", turnstile.WithQueuePosition(func(n int) {
		fmt.Printf("you are number %d in line\n", n)
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
}
