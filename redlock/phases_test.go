package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// The three deployment phases of docs/backends.md, each as the
// configuration the docs give, against real servers: take a lock, hold it (past its TTL where
// the watchdog renews it), keep everyone else out meanwhile, release it.

// TestPhase1SingleNodeFixedTTL: one Redis, SET NX, a fixed TTL and no
// watchdog. The lease ends by itself after its TTL.
func TestPhase1SingleNodeFixedTTL(t *testing.T) {
	const ttl = 500 * time.Millisecond
	srv := startNodes(t, 1)[0]
	ctx := ctxFor(t, time.Minute)
	open := func() *turnstile.Client {
		c, err := turnstile.Open(ctx, srv.URL(), turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder, other := open(), open()

	l := holdAndCheck(t, holder, other, "phase1", ttl/2)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	mustTake(t, other, "phase1")

	// A fixed TTL: without renewals the lease ends after it.
	l, err := holder.TryAcquire(ctx, "phase1:expires")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
		if !errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", context.Cause(l.Context()))
		}
	case <-time.After(2 * ttl):
		t.Fatal("a lease without watchdog outlived its TTL")
	}
	// The holder stops trusting its lease a drift allowance before the
	// server frees the lock.
	waitFor(t, ttl, "the server frees the expired lock", func() bool {
		l, err := other.TryAcquire(ctx, "phase1:expires")
		if err == nil {
			_ = l.Release(ctx)
		}
		return err == nil
	})
}

// TestPhase2ThreeNodeRedlockWatchdog: a Redlock of 3 servers, renewed by
// the watchdog, held for 4 TTLs.
// phaseRedlockTTL and phaseNodeTimeout are the Redlock phases' lease and
// node timeout: the default node timeout, 50 ms, is more than a quiet
// loopback round trip needs, but race-detector builds on a busy 2-core
// machine have been seen to miss it on all three nodes at once, and 150 ms
// at a load of 8.
const (
	phaseRedlockTTL  = 1500 * time.Millisecond
	phaseNodeTimeout = 400 * time.Millisecond
)

func TestPhase2ThreeNodeRedlockWatchdog(t *testing.T) {
	const ttl = phaseRedlockTTL
	holder, other := phaseClients(t, 3, "&fencing=off", "phase2")
	ctx := ctxFor(t, time.Minute)

	l := holdAndCheck(t, holder, other, "phase2", 4*ttl)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after 4 TTLs: %v", err)
	}
	mustTake(t, other, "phase2")
}

// TestPhase3FiveNodeRedlockFencing: a Redlock of 5 servers with fencing
// (the default) and release notices: held past its TTL, released, the
// waiter is told at once, and the next holder's token is larger.
func TestPhase3FiveNodeRedlockFencing(t *testing.T) {
	const ttl = phaseRedlockTTL
	holder, other := phaseClients(t, 5, "", "phase3")
	ctx := ctxFor(t, time.Minute)

	l := holdAndCheck(t, holder, other, "phase3", 3*ttl)
	notices, stop, err := other.Backend().(driver.Notifier).Released(ctx, "phase3")
	if err != nil {
		t.Fatalf("subscribe to releases: %v", err)
	}
	defer stop()
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-notices:
		t.Logf("release notice after %v", time.Since(released))
	case <-time.After(2 * time.Second):
		t.Fatal("no release notice")
	}
	next := mustTake(t, other, "phase3")
	if next.Token() <= l.Token() {
		t.Fatalf("next holder's token %d is not greater than %d", next.Token(), l.Token())
	}
}

// phaseClients starts a Redlock of n servers and returns two Clients of
// it with the phases' TTL and node timeout, query (URL parameters, each
// after an &) added, once the servers grant key after their quarantine.
func phaseClients(t *testing.T, n int, query, key string) (holder, other *turnstile.Client) {
	t.Helper()
	srvs := startNodes(t, n)
	url := redlockURL(srvs, "quarantine="+phaseRedlockTTL.String()+"&node_timeout="+phaseNodeTimeout.String()+query)
	holder, other = openClient(t, url, phaseRedlockTTL), openClient(t, url, phaseRedlockTTL)
	waitQuarantine(t, holder, srvs, key)
	return holder, other
}

func openClient(t *testing.T, url string, ttl time.Duration) *turnstile.Client {
	t.Helper()
	c, err := turnstile.Open(ctxFor(t, 10*time.Second), url, turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitQuarantine waits until every one of srvs, started by the test,
// grants key: until a lock c takes stands on all of them. The start
// markers are per hash slot, and the start time they hold is read in
// whole seconds, so another slot may be refused up to a second longer;
// and a quorum's grant leaves other nodes refusing a little longer.
func waitQuarantine(t *testing.T, c *turnstile.Client, srvs []*testserver.Redis, key string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	waitFor(t, 10*time.Second, "the fresh servers' quarantine ends", func() bool {
		l, err := c.TryAcquire(ctx, key)
		if err == nil {
			all := true
			for _, srv := range srvs {
				all = all && exists(t, srv, key)
			}
			_ = l.Release(ctx)
			return all
		}
		// A node timeout is not yet either: the first calls on the new
		// connections load the scripts, which on a busy machine has taken
		// longer than a node timeout on every node at once.
		if !errors.Is(err, redis.ErrQuarantined) && !errors.Is(err, redlock.ErrNodeTimeout) {
			t.Fatalf("warm-up: %v", err)
		}
		return false
	})
}

// holdAndCheck takes key with holder and holds it for d, checking that
// the lease stays valid and other cannot take the key meanwhile.
func holdAndCheck(t *testing.T, holder, other *turnstile.Client, key string, d time.Duration) *turnstile.Lease {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if l.Context().Err() != nil {
			t.Fatalf("lease ended while held: %v", context.Cause(l.Context()))
		}
		if _, err := other.TryAcquire(ctx, key); !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("another client got a held lock: %v", err)
		}
	}
	return l
}

// mustTake takes key with c on the first try and releases it when the
// test ends.
func mustTake(t *testing.T, c *turnstile.Client, key string) *turnstile.Lease {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("take %s: %v", key, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}
