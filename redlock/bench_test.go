package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redlock"
)

// BenchmarkLockUnlock compares, in one run, a single Redis node with
// Redlocks of 3 and 5 nodes (with the token write-back, and for 5 nodes
// also without it): TryAcquire+Release pairs on distinct keys through a
// Client, reporting pairs/s and the acquisition latency p50/p99 (the aim
// is p99 < 5 ms). One op is one pair; b.N pairs are split between the
// goroutines. Every server is a local redis-server process.
//
//	go test -run '^$' -bench . -benchtime 3s
func BenchmarkLockUnlock(b *testing.B) {
	srvs := startNodes(b, 5)
	nodes := redisNodes(b, srvs)
	configs := []struct {
		name  string
		nodes []driver.Backend
		opts  []redlock.Option
	}{
		{"single", nodes[:1], nil},
		{"redlock3", nodes[:3], nil},
		{"redlock5", nodes, nil},
		{"redlock5-unfenced", nodes, []redlock.Option{redlock.WithoutFencing()}},
	}
	for _, cfg := range configs {
		var backend driver.Backend = cfg.nodes[0]
		if cfg.name != "single" {
			rl, err := redlock.New(cfg.nodes, cfg.opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = rl.Close() })
			backend = rl
		}
		c, err := turnstile.New(backend)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		for _, n := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", cfg.name, n), func(b *testing.B) {
				prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
				locktest.Pairs(b, n, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
					return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
				})
			})
		}
	}
}
