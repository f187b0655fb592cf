package redis_test

import (
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
	runKinds(t, srv, func(t testing.TB) *redis.Backend { return dial(t, srv) }, 3, true)
}

// runKinds runs the conformance cases of every lock kind on srv, each
// instance a Backend that connect makes, the semaphore's with permits
// permits. children: the fair lock's cases also run in child processes,
// which open the Backend from srv's URL.
func runKinds(t *testing.T, srv *testserver.Redis, connect func(testing.TB) *redis.Backend, permits int, children bool) {
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
			New: func(t testing.TB) driver.Backend { return fairOf(t, connect(t)) },
			Waiting: func(t testing.TB, key string) int {
				return atoi(t, srv.MustDo(t, "ZCARD", lockKey(key)+":queue"))
			},
		}
		if children {
			h.URL, h.View = srv.URL(), "redis-fair"
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
