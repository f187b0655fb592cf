package postgres_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// BenchmarkLockUnlock runs TryAcquire+Release pairs on distinct keys from
// 16 goroutines through one Client with the default 4 lock connections,
// and reports pairs/s and the acquire latency percentiles.
func BenchmarkLockUnlock(b *testing.B) {
	const workers = 16
	ctx := context.Background()
	c, err := turnstile.New(dial(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		wg   sync.WaitGroup
		fail atomic.Int64
	)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/workers+1)
			key := "bench:" + run + ":" + strconv.Itoa(w)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				l, err := c.TryAcquire(ctx, key)
				mine = append(mine, time.Since(t0))
				if err != nil {
					fail.Add(1)
					continue
				}
				if err := l.Release(ctx); err != nil {
					fail.Add(1)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := fail.Load(); n > 0 {
		b.Fatalf("%d failed pairs", n)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
