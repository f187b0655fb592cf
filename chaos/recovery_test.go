package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// TestNextFaultWaitsForEveryKey: the runner injects the next fault only
// once every key has been granted since the last heal (or the bound has
// run), so that a key's recovery is measured from its heal to its grant
// and not across the next fault's outage. The fault here keeps every key
// but the first taken for 2 s after its heal, longer than the quiet time
// before a fault (steadyFor), which is all the runner used to wait for,
// and shorter than the bound.
func TestNextFaultWaitsForEveryKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	reg, err := redisproc.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Kill()
	d, err := startRedis(dir, "redis")
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	const keys, ttl, blocked = 3, 500 * time.Millisecond, 2 * time.Second
	blocker, err := turnstile.Open(ctx, d.url, turnstile.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()

	var mu sync.Mutex
	var healed time.Time // the last heal, as the fault saw it
	var early []string   // injections that found a key not granted since the last heal
	f := fault{
		name: "block-keys", desc: "every key but the first taken by another client until a while after the heal",
		applies: always, length: func(time.Duration) time.Duration { return 0 },
		inject: func(ctx context.Context, env *faultEnv) (func() error, error) {
			mu.Lock()
			since := healed
			mu.Unlock()
			if !since.IsZero() {
				if k := ungranted(env.pool, since, keys); k >= 0 {
					early = append(early, fmt.Sprintf("key %d had no grant since the heal %v before", k, time.Since(since).Round(time.Millisecond)))
				}
			}
			var leases []*turnstile.Lease
			for k := 1; k < keys; k++ {
				l, err := acquireWithin(ctx, blocker, laneKey(env.pool.key, k), 30*time.Second)
				if err != nil {
					return nil, err
				}
				leases = append(leases, l)
			}
			mu.Lock()
			healed = time.Now()
			mu.Unlock()
			time.AfterFunc(blocked, func() {
				for _, l := range leases {
					_ = l.Release(context.Background())
				}
			})
			return nil, nil
		},
	}
	s := settings{Duration: 5 * time.Second, Workers: 2, Keys: keys, TTL: ttl, Hold: 2 * time.Millisecond, Dir: dir, Log: t.Output()}
	r, err := runCell(ctx, s, d, f, reg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if r.injected < 2 {
		t.Fatalf("%d injections, want 2 or more", r.injected)
	}
	for _, e := range early {
		t.Errorf("the next fault struck while a key still waited for its first grant after the heal: %s", e)
	}
}

// ungranted is a key of keys with no grant since since (-1: none).
func ungranted(p *workers, since time.Time, keys int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	granted := map[int]bool{}
	for _, e := range p.events {
		if e.Ev == evAcquired && e.End >= since.UnixNano() {
			granted[e.K] = true
		}
	}
	for k := range keys {
		if !granted[k] {
			return k
		}
	}
	return -1
}

// acquireWithin takes key from c, trying again until within has run.
func acquireWithin(ctx context.Context, c *turnstile.Client, key string, within time.Duration) (*turnstile.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		l, err := c.Acquire(ctx, key)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("take %s: %w", key, err)
		}
	}
}
