package etcd_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// BenchmarkLockUnlock measures TryAcquire+Release pairs through one Client
// on a test-started etcd, from 16 goroutines on keys of their own. One op
// is one pair; it reports pairs/s and the acquisition latency p50/p99.
func BenchmarkLockUnlock(b *testing.B) {
	const n = 16
	srv := testserver.StartEtcd(b)
	c, err := turnstile.New(dial(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"

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
			mine := make([]time.Duration, 0, todo)
			for i := range todo {
				t0 := time.Now()
				l, err := c.TryAcquire(ctx, prefix+strconv.Itoa(g)+":"+strconv.Itoa(i))
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
