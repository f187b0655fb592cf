package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestRestartDuringHold: A holds a lock on 2 of 3 nodes (its grant on the
// third was lost), and one of A's two nodes restarts without its data.
// With the restart quarantine the restarted node refuses to vote, so B
// gets no quorum until A's lease has ended. Without it, B gets in while A
// still holds a valid lease — the hazard the quarantine exists for.
func TestRestartDuringHold(t *testing.T) {
	const ttl = 3 * time.Second
	srvs := startNodes(t, 3)
	ctx := ctxFor(t, time.Minute)

	t.Run("quarantine", func(t *testing.T) {
		a := redlockClient(t, srvs, ttl)
		b := redlockClient(t, srvs, ttl)
		// The servers started just now: they grant nothing for ttl (probed
		// with the key itself: the start markers are per hash slot).
		waitFor(t, ttl+5*time.Second, "the fresh servers' quarantine ends", func() bool {
			l, err := a.TryAcquire(ctx, "held")
			if err == nil {
				_ = l.Release(ctx)
			}
			return err == nil
		})

		la, ended := holdTwoOfThree(t, a, srvs, "held")
		srvs[0].Restart()
		restarted := time.Now()
		var got *turnstile.Lease
		for got == nil {
			l, err := b.TryAcquire(ctx, "held")
			switch {
			case err == nil:
				got = l
			case !errors.Is(err, turnstile.ErrNotAcquired) && !errors.Is(err, turnstile.ErrNoQuorum):
				t.Fatalf("B: %v", err)
			case time.Since(restarted) > ttl+5*time.Second:
				t.Fatalf("B never got the lock after A's lease ended: %v", err)
			default:
				time.Sleep(20 * time.Millisecond)
			}
		}
		at := time.Now()
		defer got.Release(ctx)
		select {
		case <-la.Context().Done():
		default:
			t.Fatalf("B got the lock %v after the restart while A's lease was still valid for %v", at.Sub(restarted), la.Validity())
		}
		if end := ended(); at.Before(end) {
			t.Fatalf("B got the lock at %v, before A's lease ended at %v", at, end)
		}
		t.Logf("B got the lock %v after the restart; A's lease had ended %v before", at.Sub(restarted), at.Sub(ended()))
	})

	t.Run("control-without-quarantine", func(t *testing.T) {
		a := redlockClient(t, srvs, ttl, redlock.WithRestartQuarantine(0))
		b := redlockClient(t, srvs, ttl, redlock.WithRestartQuarantine(0))
		la, _ := holdTwoOfThree(t, a, srvs, "unprotected")
		srvs[0].Restart()
		var lb *turnstile.Lease
		waitFor(t, 5*time.Second, "B takes the lock from the restarted node", func() bool {
			var err error
			lb, err = b.TryAcquire(ctx, "unprotected")
			return err == nil
		})
		defer lb.Release(ctx)
		if la.Context().Err() != nil {
			t.Fatalf("A's lease ended (%v) before B got in: the control shows nothing", context.Cause(la.Context()))
		}
		t.Logf("without quarantine B holds the lock while A's lease is valid for %v more", la.Validity())
	})
}

// redlockClient returns a Client with ttl and no watchdog over a Redlock
// of srvs that owns its connections; the restart quarantine equals ttl
// unless opts say otherwise.
func redlockClient(t *testing.T, srvs []*testserver.Redis, ttl time.Duration, opts ...redlock.Option) *turnstile.Client {
	t.Helper()
	b := dialRedlock(t, srvs, append([]redlock.Option{redlock.WithRestartQuarantine(ttl)}, opts...)...)
	c, err := turnstile.New(b, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holdTwoOfThree takes key with c and removes the lock from the third
// server, as if that grant had been lost: the lease then stands on
// servers 1 and 2 only. ended reports when the lease's context ended.
func holdTwoOfThree(t *testing.T, c *turnstile.Client, srvs []*testserver.Redis, key string) (l *turnstile.Lease, ended func() time.Time) {
	t.Helper()
	l, err := c.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	var at time.Time
	done := make(chan struct{})
	context.AfterFunc(l.Context(), func() { at = time.Now(); close(done) })
	waitFor(t, time.Second, "every server saw A's grant", func() bool {
		return exists(t, srvs[0], key) && exists(t, srvs[1], key) && exists(t, srvs[2], key)
	})
	if _, err := srvs[2].Do("DEL", lockKey(key)); err != nil {
		t.Fatal(err)
	}
	return l, func() time.Time { <-done; return at }
}
