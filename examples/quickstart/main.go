// Quickstart shows turnstile's promises on a real store: a flash sale where
// 40 buyers on 4 instances race for 5 units and exactly 5 orders succeed,
// fencing tokens that only grow, and a holder told the moment its lease is
// taken away.
//
//	go run ./examples/quickstart
//
// It starts its own redis-server on a free loopback port when one is
// installed, and uses the in-process memory backend otherwise (it says which).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/memory"
	_ "github.com/turnstilelock/turnstile/redis"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	open, evict, stop, err := store(out)
	if err != nil {
		return err
	}
	defer stop()

	// Four instances of a service, each with its own Client and connection.
	clients := make([]*turnstile.Client, 4)
	for i := range clients {
		c, err := open(ctx, turnstile.WithInstanceID(fmt.Sprintf("shop-%d", i+1)), turnstile.WithTTL(5*time.Second))
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}

	fmt.Fprintln(out, "\n1. Flash sale: 40 buyers, 5 units, check-then-decrement")
	fmt.Fprintf(out, "   without a lock: %d orders for 5 units\n", unlockedSale())
	var (
		stock    atomic.Int64 // read and written separately: only the lock makes it safe
		sold     atomic.Int64
		tokens   []uint64
		tokensMu sync.Mutex
		wg       sync.WaitGroup
	)
	stock.Store(5)
	for buyer := range 40 {
		c := clients[buyer%len(clients)]
		wg.Go(func() {
			err := turnstile.Do(ctx, c, "lock:inventory:12345", func(ctx context.Context, l *turnstile.Lease) error {
				left := stock.Load()
				if left <= 0 {
					return nil // sold out: no order
				}
				time.Sleep(time.Millisecond) // the slow part of checkout
				stock.Store(left - 1)
				sold.Add(1)
				tokensMu.Lock()
				tokens = append(tokens, l.Token())
				tokensMu.Unlock()
				return nil
			}, turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 50 * time.Millisecond, MaxRetries: -1}))
			if err != nil {
				fmt.Fprintln(out, "   buyer", buyer, "error:", err)
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(out, "   under lock:inventory:12345: %d orders, stock left %d\n", sold.Load(), stock.Load())
	fmt.Fprintf(out, "   fencing tokens of the 5 sales, in order: %v\n", tokens)

	fmt.Fprintln(out, "\n2. A holder is told the moment its lease is gone")
	l, err := clients[0].TryAcquire(ctx, "lock:order:42", turnstile.WithTTL(900*time.Millisecond))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   shop-1 holds lock:order:42 with token %d; an operator deletes the key...\n", l.Token())
	deleted := time.Now()
	if err := evict("lock:order:42"); err != nil {
		return err
	}
	<-l.Context().Done()
	fmt.Fprintf(out, "   shop-1's lease context was cancelled %v later: %v\n", time.Since(deleted).Round(time.Millisecond), context.Cause(l.Context()))
	if err := l.Release(ctx); errors.Is(err, turnstile.ErrNotHeld) {
		fmt.Fprintln(out, "   its Release is refused (ErrNotHeld): it cannot free someone else's lock")
	}

	fmt.Fprintln(out, "\n3. A second contender fails fast or waits")
	held, err := clients[1].TryAcquire(ctx, "lock:payment:7")
	if err != nil {
		return err
	}
	_, err = clients[2].TryAcquire(ctx, "lock:payment:7")
	fmt.Fprintln(out, "   TryAcquire while held:", err)
	go func() { time.Sleep(100 * time.Millisecond); _ = held.Release(ctx) }()
	start := time.Now()
	next, err := clients[2].Acquire(ctx, "lock:payment:7")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   Acquire waited %v and got token %d > %d\n", time.Since(start).Round(time.Millisecond), next.Token(), held.Token())
	return next.Release(ctx)
}

// unlockedSale runs the same checkout without a lock and returns how many
// orders it took for 5 units.
func unlockedSale() int64 {
	var stock, sold atomic.Int64
	stock.Store(5)
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			left := stock.Load()
			if left <= 0 {
				return
			}
			time.Sleep(time.Millisecond)
			stock.Store(left - 1)
			sold.Add(1)
		})
	}
	wg.Wait()
	return sold.Load()
}

// store returns how to open a Client on the demo's store, and a way to
// delete a lock behind its holder's back.
func store(out io.Writer) (open func(context.Context, ...turnstile.Option) (*turnstile.Client, error), evict func(key string) error, stop func(), err error) {
	if !redisproc.Available() {
		fmt.Fprintln(out, "store: redis-server is not installed, so this runs on the in-process memory backend;")
		fmt.Fprintln(out, "       install it (apt-get install redis-server) to see the same on a real server")
		b := memory.New()
		open = func(_ context.Context, opts ...turnstile.Option) (*turnstile.Client, error) {
			return turnstile.New(b, opts...)
		}
		evict = func(key string) error { b.Evict(key); return nil }
		return open, evict, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "turnstile-quickstart-")
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := redisproc.Start(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	fmt.Fprintf(out, "store: a real redis-server started on %s\n", srv.Addr())
	open = func(ctx context.Context, opts ...turnstile.Option) (*turnstile.Client, error) {
		return turnstile.Open(ctx, srv.URL(), opts...)
	}
	evict = func(key string) error { _, err := srv.Do("DEL", "{"+key+"}"); return err }
	return open, evict, func() { srv.Kill(); os.RemoveAll(dir) }, nil
}
