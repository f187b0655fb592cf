package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// BenchmarkClusterLockUnlock is BenchmarkLockUnlock's uncontended pairs
// on a Redis Cluster of testserver.ClusterMasters masters.
func BenchmarkClusterLockUnlock(b *testing.B) {
	cl := testserver.StartRedisCluster(b)
	c, err := turnstile.Open(context.Background(), cl.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
			locktest.Pairs(b, n, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
				return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
			})
		})
	}
}
