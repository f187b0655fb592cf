package turnstile_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// BenchmarkAcquireRelease measures the client's own cost per lock+release
// pair, on the in-process store.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	c, err := turnstile.New(memory.New())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			l, err := c.TryAcquire(ctx, "bench:"+strconv.Itoa(i&1023)+":"+strconv.Itoa(int(time.Now().UnixNano()&0xffff)))
			if err != nil {
				continue // two goroutines picked the same key: contention, not a failure
			}
			_ = l.Release(ctx)
		}
	})
}

// BenchmarkHeldLeaseMemory holds b.N leases under the watchdog and reports
// the client memory each one costs (target: under 1 KiB).
func BenchmarkHeldLeaseMemory(b *testing.B) {
	ctx := context.Background()
	store := memory.New()
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = "lock:inventory:" + strconv.Itoa(i)
	}
	c, err := turnstile.New(store, turnstile.WithTTL(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	leases := make([]*turnstile.Lease, b.N)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	storeBefore := store.Len()
	b.ResetTimer()
	for i := range leases {
		l, err := c.TryAcquire(ctx, keys[i])
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The store's entries live in the same heap; count them out with a
	// second measurement of the store alone.
	storeBytes := storeCost(b, store.Len()-storeBefore)
	perLease := (float64(after.HeapAlloc-before.HeapAlloc) - storeBytes) / float64(b.N)
	b.ReportMetric(perLease, "client-B/lease")
	for _, l := range leases {
		_ = l.Release(ctx)
	}
}

// storeCost is the heap the memory store needs for n entries.
func storeCost(b *testing.B, n int) float64 {
	ctx := context.Background()
	s := memory.New()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		if _, _, err := s.Acquire(ctx, "lock:inventory:"+strconv.Itoa(i), "instance-12345/ABCDEFGHIJKLMNOPQRSTUVWXYZ", time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc - before.HeapAlloc)
}
