package etcd_test

import (
	"testing"

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
