package redis_test

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
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// BenchmarkLockUnlock measures TryAcquire+Release pairs through a Client
// on a test-started redis-server: throughput and the latency of the
// acquisition (SPEC S-2: p99 < 5 ms; S-12: p50 < 1 ms). One op is one
// pair; b.N pairs are split between the goroutines.
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.StartRedis(b)
	c, err := turnstile.New(dial(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })

	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
			pairs(b, n, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
				return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
			})
		})
	}

	// Every goroutine wants one of a few hot keys; Acquire waits with a
	// short backoff, so latency includes the wait.
	b.Run("contended/goroutines=64/keys=8", func(b *testing.B) {
		const hot = 8
		backoff := turnstile.WithBackoff(turnstile.Exponential{Base: 100 * time.Microsecond, Cap: 2 * time.Millisecond, MaxRetries: -1})
		pairs(b, 64, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.Acquire(ctx, "bench:hot:"+strconv.Itoa(r.IntN(hot)), backoff)
		})
	})
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
