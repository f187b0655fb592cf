package fallback_test

import (
	"context"
	"fmt"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/memory"
)

func Example() {
	// In production: a Redis backend first, a PostgreSQL backend second.
	b, err := fallback.New(memory.New(), memory.New())
	if err != nil {
		panic(err)
	}
	c, err := turnstile.New(b)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	lease, err := c.Acquire(context.Background(), "report")
	if err != nil {
		panic(err)
	}
	defer lease.Release(context.Background())
	serving, inGrace := b.Serving()
	fmt.Println(b.State(), serving, inGrace)
	// Output: closed memory false
}
