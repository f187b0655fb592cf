package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/mysql"
)

// BenchmarkLockUnlock: 16 goroutines on one Backend acquire and release
// keys of their own; it reports pairs/s and the acquire latency
// percentiles, with the default and with 16 connections.
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.StartMySQL(b)
	for _, conns := range []int{mysql.DefaultConns, 16} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			benchLockUnlock(b, dial(b, srv, mysql.WithConns(conns)))
		})
	}
}

func benchLockUnlock(b *testing.B, be *mysql.Backend) {
	const workers = 16
	ctx := context.Background()
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			key, owner := fmt.Sprintf("bench:%d", w), fmt.Sprintf("owner-%d", w)
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				_, ok, err := be.Acquire(ctx, key, owner, 10*time.Second)
				mine = append(mine, time.Since(t0))
				if err != nil || !ok {
					b.Errorf("acquire: ok=%v err=%v", ok, err)
					return
				}
				if ok, err := be.Release(ctx, key, owner); err != nil || !ok {
					b.Errorf("release: ok=%v err=%v", ok, err)
					return
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
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
