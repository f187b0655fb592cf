package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// BenchmarkLockUnlock measures TryAcquire+Release pairs through a Client
// on a test-started redis-server: throughput and the latency of the
// acquisition (the aim: p99 < 5 ms, p50 < 1 ms). One op is one
// pair; b.N pairs are split between the goroutines.
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.StartRedis(b)
	c, err := turnstile.New(dial(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })

	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
			locktest.Pairs(b, n, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
				return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
			})
		})
	}

	// Every goroutine wants one of a few hot keys; Acquire waits with a
	// short backoff, so latency includes the wait.
	b.Run("contended/goroutines=64/keys=8", func(b *testing.B) {
		const hot = 8
		backoff := turnstile.WithBackoff(turnstile.Exponential{Base: 100 * time.Microsecond, Cap: 2 * time.Millisecond, MaxRetries: -1})
		locktest.Pairs(b, 64, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.Acquire(ctx, "bench:hot:"+strconv.Itoa(r.IntN(hot)), backoff)
		})
	})
}
