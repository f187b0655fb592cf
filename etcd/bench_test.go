package etcd_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
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
	locktest.Pairs(b, n, locktest.DistinctKeys(c))
}

// BenchmarkHotKeyBusyStore measures a hot key passed among three
// Clients (as three processes would hold it in turn) on an etcd that
// also writes other keys meanwhile, as a store serving more than one
// lock does. One op is one lock+unlock pair of the hot key; it reports
// pairs/s. The handoff is a waiter's watch seeing the release: how soon
// etcd sends it on a busy store is what this measures.
func BenchmarkHotKeyBusyStore(b *testing.B) {
	const clients = 3
	srv := testserver.StartEtcd(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	raw := rawClient(b, srv)
	churned := make(chan struct{})
	go func() { // the other locks' writes
		defer close(churned)
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = raw.Put(ctx, "/busy/"+strconv.Itoa(i%64), "x")
		}
	}()
	cs := make([]*turnstile.Client, clients)
	for i := range cs {
		c, err := turnstile.New(dial(b, srv))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	var wg sync.WaitGroup
	errs := make([]error, clients)
	b.ResetTimer()
	start := time.Now()
	for g, c := range cs {
		n := b.N / clients
		if g < b.N%clients {
			n++
		}
		wg.Go(func() {
			for range n {
				l, err := c.Acquire(ctx, "hot")
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
	b.StopTimer()
	cancel()
	<-churned
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
