package turnstile_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

func ExampleClient_Election() {
	ctx := context.Background()
	c, err := turnstile.New(memory.New(), turnstile.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	e, err := c.Election("leader:scheduler")
	if err != nil {
		fmt.Println(err)
		return
	}

	// Blocks until this process leads.
	lead, err := e.Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Work while lead.Context() is live; write with lead.Term() as the
	// fencing token.
	who, _ := e.Leader(ctx)
	fmt.Println(who.Value, who.Term == lead.Term())

	// Step down: the next candidate is elected at once.
	_ = lead.Resign(ctx)
	fmt.Println(lead.Context().Err() != nil)
	// Output:
	// 10.0.0.7:8080 true
	// true
}

func ExampleElection_Observe() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := turnstile.New(memory.New())
	defer c.Close()
	e, _ := c.Election("leader:scheduler")

	seen := make(chan struct{})
	go func() {
		lead, err := e.Campaign(ctx, "node-a")
		if err == nil {
			<-seen // lead until the observer below has seen it
			_ = lead.Resign(ctx)
		}
	}()
	elected := false
	for who, err := range e.Observe(ctx, 10*time.Millisecond) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if who.Elected {
			fmt.Println(who.Value, "leads")
			elected = true
			close(seen)
		} else if elected {
			fmt.Println("no leader")
			break
		}
	}
	// Output:
	// node-a leads
	// no leader
}
