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
func ExampleBackend_Reentrant() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := turnstile.New(b.Reentrant(), turnstile.WithOwner("invoice-run-2024-06"))
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
func ExampleBackend_ReadWrite() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	rw, err := b.ReadWrite()
	if err != nil {
		log.Fatal(err)
	}
	readers, err := turnstile.New(rw.Read())
	if err != nil {
		log.Fatal(err)
	}
	defer readers.Close()
	writers, err := turnstile.New(rw.Write())
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
func ExampleBackend_Semaphore() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	sem, err := b.Semaphore(3)
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
func ExampleBackend_Fair() {
	ctx := context.Background()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fair, err := b.Fair()
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
