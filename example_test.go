package turnstile_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

func Example() {
	ctx := context.Background()
	c, err := turnstile.New(memory.New(), turnstile.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	lease, err := c.Acquire(ctx, "lock:inventory:12345")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)

	// A second contender fails fast.
	_, err = c.TryAcquire(ctx, "lock:inventory:12345")
	fmt.Println(errors.Is(err, turnstile.ErrNotAcquired))
	fmt.Println(lease.Token() > 0, lease.Validity() > 9*time.Second)
	// Output:
	// true
	// true true
}

func ExampleDo() {
	ctx := context.Background()
	c, err := turnstile.Open(ctx, "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	err = turnstile.Do(ctx, c, "lock:order:42", func(ctx context.Context, l *turnstile.Lease) error {
		// ctx is cancelled if the lease is lost: stop writing then, and
		// pass l.Token() to the storage so it can refuse stale writers.
		fmt.Println("assigning a rider to order 42 under token", l.Token())
		return nil
	})
	fmt.Println(err)
	// Output:
	// assigning a rider to order 42 under token 1
	// <nil>
}

func ExampleLease_Context() {
	ctx := context.Background()
	c, _ := turnstile.New(memory.New())
	defer c.Close()

	lease, _ := c.TryAcquire(ctx, "lock:job:resize", turnstile.WithTTL(200*time.Millisecond), turnstile.WithoutWatchdog())
	<-lease.Context().Done() // no watchdog: the lease ends with its TTL
	fmt.Println(errors.Is(context.Cause(lease.Context()), turnstile.ErrLockLost))
	// Output:
	// true
}
