package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// extendCounter counts the Extends a Client sends its backend.
type extendCounter struct {
	*zookeeper.Backend
	n atomic.Int32
}

func (e *extendCounter) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	e.n.Add(1)
	return e.Backend.Extend(ctx, key, owner, ttl)
}

// TestQueueGrantIsNotRenewed: a lock the queue grants says from when
// ZooKeeper holds it — the write that marks it granted, which the
// session's servers heard — so the Client hands it out without renewing
// it first: one read fewer per acquisition. The lease's validity counts
// from that write, and renewing it later works.
func TestQueueGrantIsNotRenewed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := &extendCounter{Backend: dial(t)}
	const ttl = 10 * time.Second
	c, err := turnstile.New(b, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		before := time.Now()
		l, err := c.Acquire(ctx, "since")
		if err != nil {
			t.Fatal(err)
		}
		if n := b.n.Load(); n != 0 {
			t.Fatalf("%d renewals before the lease started, want none", n)
		}
		if v, took := l.Validity(), time.Since(before); v > ttl || v < ttl-took-time.Second {
			t.Fatalf("validity %v after a grant that took %v; want within (%v, %v]", v, took, ttl-took-time.Second, ttl)
		}
		if err := l.Extend(ctx, ttl); err != nil {
			t.Fatalf("renewing the lease: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b.n.Store(0)
	}
}

// TestQueueGrantOnACutSession: a waiter granted the lock after its
// session was cut below the TTL (a reconnection to a server with a lower
// maxSessionTimeout, during the wait) is not handed a lease of the TTL:
// the grant says nothing of when ZooKeeper holds it, the Client's
// renewal finds the hold lost, and the Acquire fails.
func TestQueueGrantOnACutSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := dial(t)
	const ttl = 10 * time.Second
	c, err := turnstile.New(b, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	holder, err := c.TryAcquire(ctx, "cut")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "cut", turnstile.WithBackoff(turnstile.Constant{Interval: time.Second, MaxRetries: -1}))
		if err == nil {
			err = fmt.Errorf("granted a lease valid for %v on a 2s session", l.Validity())
			_ = l.Release(ctx)
		}
		waited <- err
	}()
	raw := rawConn(t)
	for deadline := time.Now().Add(10 * time.Second); len(queue(t, raw, "/turnstile/locks/cut")) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not queue")
		}
	}
	b.CutSession(2 * time.Second)
	_ = holder.Release(ctx)
	if err := <-waited; !errors.Is(err, turnstile.ErrNotAcquired) || !strings.Contains(err.Error(), "lost right after") {
		t.Fatalf("the waiter granted on a cut session: %v; want ErrNotAcquired, lost right after the grant", err)
	}
}

// TestTokenAboveAGrantMeanwhile: an acquisition — TryAcquire, or
// Acquire through the queue — whose node was created while a waiter was
// ahead of it, and which finds itself first only after that waiter was
// granted the lock and let it go, gets a token above the waiter's: the
// tokens of one key increase in the order of the grants.
func TestTokenAboveAGrantMeanwhile(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(map[bool]string{false: "TryAcquire", true: "queued"}[queued], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const ttl = 10 * time.Second
			key := "order-" + t.Name()[len("TestTokenAboveAGrantMeanwhile/"):]
			h, w, late := dial(t), dial(t), dial(t)
			if _, ok, err := h.Acquire(ctx, key, "h", ttl); !ok || err != nil {
				t.Fatalf("holder: %v %v", ok, err)
			}
			granted := make(chan uint64, 1)
			go func() {
				tok, err := w.AcquireWait(ctx, key, "w", ttl)
				if err != nil {
					t.Error(err)
				}
				granted <- tok
			}()
			raw := rawConn(t)
			for deadline := time.Now().Add(10 * time.Second); len(queue(t, raw, "/turnstile/locks/"+key)) < 2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the waiter did not queue")
				}
			}
			var wtok uint64
			late.BeforeList(func() {
				if _, err := h.Release(ctx, key, "h"); err != nil {
					t.Error(err)
				}
				wtok = <-granted
				if _, err := w.Release(ctx, key, "w"); err != nil {
					t.Error(err)
				}
			})
			var tok uint64
			var err error
			if queued {
				tok, err = late.AcquireWait(ctx, key, "late", ttl)
			} else {
				var ok bool
				if tok, ok, err = late.Acquire(ctx, key, "late", ttl); !ok && err == nil {
					t.Fatal("TryAcquire after both let go found the lock held")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if tok <= wtok {
				t.Fatalf("token %d not above %d, the token of the waiter granted and released meanwhile", tok, wtok)
			}
		})
	}
}
