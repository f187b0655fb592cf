package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redis"
)

// TestKindsCluster runs the kinds' cases on a Redis Cluster: every
// script of a kind names keys of one hash slot, which a cluster checks.
func TestKindsCluster(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) }) // runs last: after every client closed
	cl := testserver.StartRedisCluster(t)
	admin := clusterAdmin(t, cl)
	// One backend for every instance: dialling a cluster client per
	// instance is slow under -race, and the views of one backend share its
	// release subscriptions.
	b, err := redis.New(clusterAdmin(t, cl))
	if err != nil {
		t.Fatal(err)
	}
	backend := func(testing.TB) *redis.Backend { return b }
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{New: func(t testing.TB) driver.Backend { return reentrantOf(t, backend(t)) }})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			return readWriteOf(t, backend(t), turnstile.WithWriterClaim(500*time.Millisecond))
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{New: func(t testing.TB) driver.Backend {
			s := semaphoreOf(t, backend(t), 3)
			return s
		}, Plain: func(t testing.TB) driver.Backend { return backend(t) }}, 3)
	})
	t.Run("Fair", func(t *testing.T) {
		locktest.RunFair(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				f := fairOf(t, backend(t))
				return f
			},
			Waiting: func(t testing.TB, key string) int {
				n, err := admin.Do(context.Background(), admin.B().Zcard().Key(lockKey(key)+":queue").Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			},
		})
	})
}
