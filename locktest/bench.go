package locktest

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

// Pairs is the benchmark every backend runs: b.N acquire+release pairs
// split over the given number of goroutines, reporting pairs/s and the
// acquisition latency percentiles acq-p50-µs and acq-p99-µs. acquire gets
// a random source of its goroutine's own.
func Pairs(b *testing.B, goroutines int, acquire func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error)) {
	PairsFunc(b, goroutines, func(ctx context.Context, r *rand.Rand) (func() error, error) {
		l, err := acquire(ctx, r)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(ctx) }, nil
	})
}

// PairsFunc is Pairs for any lock, turnstile's or another's: acquire
// returns the function that releases what it took.
func PairsFunc(b *testing.B, goroutines int, acquire func(ctx context.Context, r *rand.Rand) (release func() error, err error)) {
	ctx := context.Background()
	lat := make([][]time.Duration, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range goroutines {
		share := b.N / goroutines
		if g < b.N%goroutines {
			share++
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(rand.Uint64(), uint64(g)))
			mine := make([]time.Duration, 0, share)
			for range share {
				t0 := time.Now()
				release, err := acquire(ctx, r)
				mine = append(mine, time.Since(t0))
				if err == nil {
					err = release()
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

// DistinctKeys is an acquire function for Pairs: TryAcquire on random
// keys that no other goroutine or run uses, so nothing contends.
func DistinctKeys(c *turnstile.Client) func(context.Context, *rand.Rand) (*turnstile.Lease, error) {
	prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
	return func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
		return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
