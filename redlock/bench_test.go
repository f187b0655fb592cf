package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/redlock"
)

// BenchmarkLockUnlock compares, in one run, a single Redis node with
// Redlocks of 3 and 5 nodes (with the token write-back, and for 5 nodes
// also without it): TryAcquire+Release pairs on distinct keys through a
// Client, reporting pairs/s and the acquisition latency p50/p99 (SPEC
// S-2: p99 < 5 ms). One op is one pair; b.N pairs are split between the
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
				pairs(b, n, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
					return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
				})
			})
		}
	}
}

// pairs runs b.N acquire+release pairs on n goroutines and reports
// pairs/s and the acquisition latency percentiles.
func pairs(b *testing.B, n int, acquire func(context.Context, *rand.Rand) (*turnstile.Lease, error)) {
	ctx := context.Background()
	lat := make([][]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range n {
		todo := b.N / n
		if g < b.N%n {
			todo++
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(rand.Uint64(), uint64(g)))
			mine := make([]time.Duration, 0, todo)
			for range todo {
				t0 := time.Now()
				l, err := acquire(ctx, r)
				mine = append(mine, time.Since(t0))
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs[g] = err
					break
				}
			}
			lat[g] = mine
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(micros(percentile(all, 0.50)), "acq-p50-µs")
	b.ReportMetric(micros(percentile(all, 0.99)), "acq-p99-µs")
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
