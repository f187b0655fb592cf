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
	ctx := ctxFor(t, 2*time.Minute)

	// Node timeouts of a tenth of the TTL, not 50 ms: a node answering
	// late on a busy machine is not what this test is about.
	slow := redlock.WithNodeTimeout(time.Second)

	t.Run("quarantine", func(t *testing.T) {
		a := redlockClient(t, srvs, ttl, slow)
		b := redlockClient(t, srvs, ttl, slow)
		// The servers started just now: they grant nothing for ttl (probed
		// with the key itself: the start markers are per hash slot), and
		// A needs the grants of the first two.
		probe := redlockClient(t, srvs, ttl, slow, redlock.WithWaitAll())
		waitFor(t, ttl+10*time.Second, "the fresh servers' quarantine ends on every server", func() bool {
			l, err := probe.TryAcquire(ctx, "held")
			if err != nil {
				return false
			}
			all := exists(t, srvs[0], "held") && exists(t, srvs[1], "held") && exists(t, srvs[2], "held")
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return all
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
			case !errors.Is(err, turnstile.ErrNotAcquired) && !errors.Is(err, redlock.ErrNoQuorum):
				t.Fatalf("B: %v", err)
			case time.Since(restarted) > ttl+5*time.Second:
				t.Fatalf("B never got the lock after A's lease ended: %v", err)
			default:
				time.Sleep(20 * time.Millisecond)
			}
		}
		at, aValid := time.Now(), la.Validity()
		defer got.Release(ctx)
		// A's validity is what keeps it out of B's way: it must have run
		// out before B's grant. A timer cancels the lease's context when
		// it does, which a busy machine may run a little later.
		if aValid > 0 {
			t.Fatalf("B got the lock %v after the restart while A's lease was still valid for %v", at.Sub(restarted), aValid)
		}
		select {
		case <-la.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("A's lease had no validity left, and its context was not cancelled within 10 s")
		}
		t.Logf("B got the lock %v after the restart; A's lease context ended %v from B's grant (negative: before it)", at.Sub(restarted), ended().Sub(at))
	})

	t.Run("control-without-quarantine", func(t *testing.T) {
		// A lease long enough to outlast a restart and B's attempts on a
		// busy machine (where reconnecting to the restarted node has
		// taken over 15 s): B must get in while it is valid.
		// B's leases are short: an attempt whose reply from the
		// reconnecting node was lost may leave a grant there that its
		// clean-up could not reach, and B's next attempts are refused
		// until it expires.
		const ttl = time.Minute
		a := redlockClient(t, srvs, ttl, slow, redlock.WithRestartQuarantine(0))
		b := redlockClient(t, srvs, 5*time.Second, slow, redlock.WithRestartQuarantine(0))
		la, _ := holdTwoOfThree(t, a, srvs, "unprotected")
		srvs[0].Restart()
		var lb *turnstile.Lease
		var last error
		defer func() {
			if lb == nil {
				t.Logf("B's last attempt: %v", last)
			}
		}()
		waitFor(t, 45*time.Second, "B takes the lock from the restarted node", func() bool {
			lb, last = b.TryAcquire(ctx, "unprotected")
			return last == nil
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

// holdTwoOfThree takes key with c while another owner holds it on the
// third server, then removes that lock, as if A's grant there had been
// lost: the lease then stands on servers 1 and 2 only. (Taking the key on
// all three and removing A's grant from the third would depend on the
// third server's answer: Acquire returns once two of them granted, and a
// third grant still on its way when the node timeout passes may never
// land.) ended reports when the lease's context ended.
func holdTwoOfThree(t *testing.T, c *turnstile.Client, srvs []*testserver.Redis, key string) (l *turnstile.Lease, ended func() time.Time) {
	t.Helper()
	if _, err := srvs[2].Do("SET", lockKey(key), "another-owner", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	var at time.Time
	done := make(chan struct{})
	context.AfterFunc(l.Context(), func() { at = time.Now(); close(done) })
	// Both granted before TryAcquire returned: the third refused.
	if !exists(t, srvs[0], key) || !exists(t, srvs[1], key) {
		t.Fatal("A holds the lock without a grant on both servers 1 and 2")
	}
	if _, err := srvs[2].Do("DEL", lockKey(key)); err != nil {
		t.Fatal(err)
	}
	return l, func() time.Time { <-done; return at }
}
