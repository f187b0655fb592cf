package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redis"
)

func init() {
	// Child processes of the fair lock's cases open the plain backend
	// from the URL and wait through its fair view.
	locktest.RegisterView("redis-fair", func(b driver.Backend) (driver.Backend, error) {
		return turnstile.Fair(b)
	})
}

// TestKinds runs the conformance cases of every lock kind on one server,
// over rueidis.
func TestKinds(t *testing.T) {
	srv := testserver.StartRedis(t)
	runKinds(t, func(t testing.TB) *redis.Backend { return dial(t, srv) }, queueLength(srv), 3, srv.URL())
}

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
	waiting := func(t testing.TB, key string) int {
		n, err := admin.Do(context.Background(), admin.B().Zcard().Key(lockKey(key)+":queue").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	runKinds(t, func(testing.TB) *redis.Backend { return b }, waiting, 3, "")
}

// queueLength returns how many owners wait in the fair queue of a key on
// srv.
func queueLength(srv *testserver.Redis) func(t testing.TB, key string) int {
	return func(t testing.TB, key string) int {
		return atoi(t, srv.MustDo(t, "ZCARD", lockKey(key)+":queue"))
	}
}

// runKinds runs the conformance cases of every lock kind, each instance
// a Backend that connect makes, the semaphore's with permits permits;
// waiting counts the owners in a key's fair queue. With a url, the fair
// lock's cases also run in child processes, which open the Backend from
// it.
func runKinds(t *testing.T, connect func(testing.TB) *redis.Backend, waiting func(t testing.TB, key string) int, permits int, url string) {
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return reentrantOf(t, connect(t)) },
		})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			return readWriteOf(t, connect(t), turnstile.WithWriterClaim(500*time.Millisecond))
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New:   func(t testing.TB) driver.Backend { return semaphoreOf(t, connect(t), permits) },
			Plain: func(t testing.TB) driver.Backend { return connect(t) },
		}, permits)
	})
	t.Run("Fair", func(t *testing.T) {
		h := locktest.Harness{
			New:     func(t testing.TB) driver.Backend { return fairOf(t, connect(t)) },
			Waiting: waiting,
		}
		if url != "" {
			h.URL, h.View = url, "redis-fair"
			// Retry on the plain lock, queue in the Fair view.
			h.Plain = func(t testing.TB) driver.Backend { return connect(t) }
		}
		locktest.RunFair(t, h)
	})
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number: %v", s, err)
	}
	return n
}
