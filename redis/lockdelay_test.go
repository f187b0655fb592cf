package redis_test

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// TestLockDelayCostsNoCommand: a lock delay (turnstile.WithLockDelay)
// rides on the PX the acquisition and the renewal send anyway: a Client
// with one runs the same server commands per acquisition, renewal and
// release as a Client without, and the lock key's PTTL is the TTL plus
// the delay.
func TestLockDelayCostsNoCommand(t *testing.T) {
	srv, ctx := startRedis(t)
	const ttl, delay = 10 * time.Second, 5 * time.Second
	costs := func(key string, opts ...turnstile.Option) (acquire, extend, release map[string]int) {
		t.Helper()
		c, err := turnstile.New(dial(t, srv), append([]turnstile.Option{turnstile.WithTTL(ttl), turnstile.WithoutWatchdog()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Loads the scripts and samples the clock.
		if l, err := c.TryAcquire(ctx, "warm:"+key); err == nil {
			_ = l.Extend(ctx, ttl)
			_ = l.Release(ctx)
		}
		before := commandCounts(t, srv)
		l, err := c.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		acquire = diff(before, commandCounts(t, srv))
		pttl, err := strconv.Atoi(srv.MustDo(t, "PTTL", lockKey(key)))
		if err != nil {
			t.Fatal(err)
		}
		if want := ttl + time.Duration(len(opts))*delay; time.Duration(pttl)*time.Millisecond > want || time.Duration(pttl)*time.Millisecond < want-2*time.Second {
			t.Fatalf("PTTL of the lock key %d ms, want about %v", pttl, want)
		}
		mid := commandCounts(t, srv)
		if err := l.Extend(ctx, ttl); err != nil {
			t.Fatal(err)
		}
		after := commandCounts(t, srv)
		extend = diff(mid, after)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		release = diff(after, commandCounts(t, srv))
		return acquire, extend, release
	}
	pa, pe, pr := costs("plain")
	da, de, dr := costs("delayed", turnstile.WithLockDelay(delay))
	t.Logf("per acquisition: %v without a lock delay, %v with; renewal %v / %v; release %v / %v", pa, da, pe, de, pr, dr)
	if !maps.Equal(pa, da) || !maps.Equal(pe, de) || !maps.Equal(pr, dr) {
		t.Fatalf("a lock delay changed the commands: acquire %v → %v, renewal %v → %v, release %v → %v", pa, da, pe, de, pr, dr)
	}
}
