package stock_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/stock"
)

// buyers is how many goroutines place orders at once in the benchmarks.
const buyers = 16

// parallel runs take from buyers goroutines (rounded up to a multiple of
// GOMAXPROCS) until b.N orders are placed, and reports how many were sold
// out or conflicted per order.
func parallel(b *testing.B, take func(worker int) error) {
	b.SetParallelism((buyers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var workers, soldOut, conflicts atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(workers.Add(1))
		for pb.Next() {
			err := take(w)
			switch {
			case err == nil:
			case errors.Is(err, stock.ErrSoldOut):
				soldOut.Add(1)
			case errors.Is(err, stock.ErrConflict):
				conflicts.Add(1)
			default:
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(soldOut.Load())/float64(b.N), "soldout/op")
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
}

func BenchmarkCounterTake(b *testing.B) {
	srv := testserver.StartRedis(b)
	ctx := ctxFor(b, 10*time.Minute)
	c := newCounter(b, srv, "bench:counter")
	if err := c.Set(ctx, stock.MaxQuantity); err != nil {
		b.Fatal(err)
	}
	parallel(b, func(int) error {
		_, err := c.Take(ctx, 1)
		return err
	})
}

func BenchmarkShardedTake(b *testing.B) {
	for _, shards := range []int{1, 8, 64} {
		b.Run(strconv.Itoa(shards)+"shards", func(b *testing.B) {
			srv := testserver.StartRedis(b)
			ctx := ctxFor(b, 10*time.Minute)
			s := newSharded(b, srv, "bench:sharded", shards)
			if err := s.Set(ctx, stock.MaxQuantity); err != nil {
				b.Fatal(err)
			}
			parallel(b, func(int) error {
				_, err := s.Take(ctx, 1)
				return err
			})
		})
	}
}

// BenchmarkCASTake: HotRow is every buyer on one row, where
// compare-and-sets conflict; RowPerBuyer gives each buyer a row of its own.
func BenchmarkCASTake(b *testing.B) {
	for _, hot := range []bool{true, false} {
		name := "RowPerBuyer"
		if hot {
			name = "HotRow"
		}
		b.Run(name, func(b *testing.B) {
			ctx := ctxFor(b, 10*time.Minute)
			c := newCAS(b, pgPool(b, buyers))
			id := func(w int) string {
				if hot {
					return "bench:hot"
				}
				return "bench:row:" + strconv.Itoa(w)
			}
			for w := range buyers + runtime.GOMAXPROCS(0) + 1 {
				if err := c.Set(ctx, id(w), stock.MaxQuantity); err != nil {
					b.Fatal(err)
				}
			}
			parallel(b, func(w int) error {
				_, err := c.Take(ctx, id(w), 1)
				return err
			})
		})
	}
}
