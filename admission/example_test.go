package admission_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/admission"
	"github.com/turnstilelock/turnstile/memory"
)

// A per-process limit in front of an in-memory lock: two acquisitions of
// "order:42" are admitted at once (the burst), the third is refused.
func ExampleNewLocal() {
	ctx := context.Background()
	limit, err := admission.NewLocal(admission.Limit{Rate: 0.1, Burst: 2})
	if err != nil {
		panic(err)
	}
	c, err := turnstile.New(memory.New(), turnstile.WithAdmission(limit, turnstile.RejectOverLimit))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for range 3 {
		lease, err := c.TryAcquire(ctx, "order:42")
		if errors.Is(err, turnstile.ErrRateLimited) {
			fmt.Println("refused: over the limit")
			continue
		}
		if err != nil {
			panic(err)
		}
		fmt.Println("acquired")
		_ = lease.Release(ctx)
	}
	// Output:
	// acquired
	// acquired
	// refused: over the limit
}

// One limit for every instance: 1,000 acquisitions a second of each key,
// kept in Redis; callers over it wait in line for their turn.
func ExampleNewRedis() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	limit, err := admission.NewRedis(client, admission.Limit{Rate: 1000, Burst: 20})
	if err != nil {
		panic(err)
	}
	c, err := turnstile.New(memory.New(), turnstile.WithAdmission(limit, turnstile.QueueOverLimit))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	lease, err := c.Acquire(ctx, "lock:inventory:12345", turnstile.WithQueuePosition(func(n int) {
		fmt.Println("position in line:", n)
	}))
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
}
