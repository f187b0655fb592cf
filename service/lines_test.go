package service_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// countingStore counts the acquisition attempts that reach the store.
type countingStore struct {
	*memory.Backend
	attempts atomic.Int64
}

func (c *countingStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	c.attempts.Add(1)
	return c.Backend.Acquire(ctx, key, owner, ttl)
}

// TestAcquireWaitersLineUp: callers waiting in Acquire on one instance
// line up behind the first of them, which alone asks the store (here
// on its backoff timer: the memory store sends no notices); they do not
// each poll it. Then each gets the lock in turn, with a greater token.
func TestAcquireWaitersLineUp(t *testing.T) {
	store := &countingStore{Backend: memory.New()}
	in := startInstance(t, service.Config{Backend: store})
	c := clientsOf(t, in.addr)
	ctx := ctxFor(t, time.Minute)
	g, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "line"}))
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 10
	leases := make(chan *v1.Lease, waiters)
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			r, err := c.locks.Acquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "line", Wait: durationpb.New(time.Minute)}))
			if err != nil {
				errs <- err
				return
			}
			leases <- r.Msg.Lease
		})
	}
	time.Sleep(200 * time.Millisecond) // every waiter has arrived
	before := store.attempts.Load()
	const window = time.Second
	time.Sleep(window)
	during := store.attempts.Load() - before
	// The head's backoff in a second: 10, 20, 40 … ms, capped at 1 s,
	// with full jitter — at most a dozen attempts; ten waiters polling
	// each would make five or more apiece.
	if during > 15 {
		t.Fatalf("%d attempts reached the store in %v while %d callers waited: they poll it each", during, window, waiters)
	}
	last := g.Msg.Lease
	if _, err := c.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: last})); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		select {
		case l := <-leases:
			if l.Token <= last.Token {
				t.Fatalf("token %d after %d", l.Token, last.Token)
			}
			last = l
			if _, err := c.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: l})); err != nil {
				t.Fatal(err)
			}
		case err := <-errs:
			t.Fatal(err)
		}
	}
	wg.Wait()
	t.Logf("%d attempts in %v while %d waited; %d in all", during, window, waiters, store.attempts.Load())
}
