package zookeeper_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// BenchmarkLockUnlock measures TryAcquire+Release pairs through a Client
// on the package's ZooKeeper server, as the other backends' benchmarks do:
// throughput and acquisition latency at concurrency 16. One op is one
// pair. The contended case queues 16 goroutines on 4 keys (AcquireWait).
func BenchmarkLockUnlock(b *testing.B) {
	c, err := turnstile.New(dial(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	b.Run("goroutines=1", func(b *testing.B) {
		prefix := "bench1:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
		pairs(b, 1, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
		})
	})
	b.Run("goroutines=16", func(b *testing.B) {
		prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
		pairs(b, 16, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
		})
	})
	b.Run("contended/goroutines=16/keys=4", func(b *testing.B) {
		pairs(b, 16, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.Acquire(ctx, "bench:hot:"+strconv.Itoa(r.IntN(4)),
				turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: -1}))
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
