package fallback_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestLockDelayOutlivesFailover: a holder with a lock delay dies in Redis
// (its Client closes without releasing), and Redis dies with its lock;
// another process moves the pair to PostgreSQL, which never saw the lock.
// The key must stay free of grants for TTL + delay from the dead
// holder's grant all the same: the switch's grace, which must cover TTL +
// delay (MaxTTL), keeps PostgreSQL from granting anything sooner.
func TestLockDelayOutlivesFailover(t *testing.T) {
	const (
		ttl   = 500 * time.Millisecond
		delay = time.Second
		grace = 2 * time.Second // MaxTTL(2 s) = 1.858 s: covers TTL + delay
	)
	srv := testserver.StartRedis(t)
	open := func() (*turnstile.Client, *fallback.Backend) {
		b, err := fallback.New(dialRedis(t, srv), dialPostgres(t), fallback.WithGrace(grace),
			fallback.WithTripAfter(1), fallback.WithOpenTimeout(time.Minute), fallback.WithPair("lockdelay-"+t.Name()))
		if err != nil {
			t.Fatalf("fallback.New: %v", err)
		}
		c, err := turnstile.New(b, turnstile.WithTTL(ttl), turnstile.WithLockDelay(delay))
		if err != nil {
			t.Fatalf("turnstile.New: %v", err)
		}
		return c, b
	}
	dead, _ := open()
	next, pair := open()
	defer next.Close()
	key := "fallback:" + t.Name()

	asked := time.Now()
	if _, err := dead.Acquire(ctxFor(t, 5*time.Second), key); err != nil {
		t.Fatalf("the first holder's Acquire: %v", err)
	}
	if err := dead.Close(); err != nil { // no clean release: the delay holds
		t.Fatal(err)
	}
	srv.Kill()

	ctx := ctxFor(t, 30*time.Second)
	for {
		l, err := next.TryAcquire(ctx, key)
		if err == nil {
			got := time.Now()
			_ = l.Release(context.Background())
			if free := asked.Add(ttl + delay); got.Before(free) {
				t.Fatalf("granted %v after the dead holder asked, before TTL + delay (%v) had run", got.Sub(asked), ttl+delay)
			}
			if name, _ := pair.Serving(); !strings.Contains(name, "postgres") {
				t.Fatalf("granted by %s, want PostgreSQL after the failover", name)
			}
			t.Logf("granted %v after the dead holder asked (TTL + delay %v, grace %v)", got.Sub(asked), ttl+delay, grace)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no grant within 30 s of the failover: %v", err)
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
}
