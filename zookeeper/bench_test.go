package zookeeper_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// BenchmarkLockUnlock measures TryAcquire+Release pairs through a Client
// on the package's ZooKeeper server, as the other backends' benchmarks do:
// throughput and acquisition latency at concurrency 16. One op is one
// pair. The contended case queues 16 goroutines on 4 keys (AcquireWait).
func BenchmarkLockUnlock(b *testing.B) {
	c, err := turnstile.New(dial(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	b.Run("goroutines=1", func(b *testing.B) {
		prefix := "bench1:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
		locktest.Pairs(b, 1, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
		})
	})
	b.Run("goroutines=16", func(b *testing.B) {
		prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
		locktest.Pairs(b, 16, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
		})
	})
	b.Run("contended/goroutines=16/keys=4", func(b *testing.B) {
		locktest.Pairs(b, 16, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
			return c.Acquire(ctx, "bench:hot:"+strconv.Itoa(r.IntN(4)),
				turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: -1}))
		})
	})
}

// BenchmarkDigestLockUnlock measures what digest credentials add to a
// TryAcquire+Release pair, against the same pairs without them, each
// under a root of its own: on a new key (its directory made, and with
// credentials its ACL verified, on each pair) and on one key (its
// directory there already, verified once).
func BenchmarkDigestLockUnlock(b *testing.B) {
	for _, tenant := range []struct {
		name string
		opts []zookeeper.Option
	}{
		{"anonymous", nil},
		{"digest", []zookeeper.Option{zookeeper.WithDigestAuth("bench", "QJZVWKbenchQJZVWK")}},
	} {
		root := "/bench-" + tenant.name + "-" + strconv.FormatUint(rand.Uint64(), 36) + zookeeper.DefaultRoot
		c, err := turnstile.New(dial(b, append(tenant.opts, zookeeper.WithRoot(root))...))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		b.Run(tenant.name+"/new-key", func(b *testing.B) {
			locktest.Pairs(b, 1, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
				return c.TryAcquire(ctx, strconv.FormatUint(r.Uint64(), 36))
			})
		})
		b.Run(tenant.name+"/same-key", func(b *testing.B) {
			locktest.Pairs(b, 1, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
				return c.TryAcquire(ctx, "same")
			})
		})
	}
}
