package redis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
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
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return reentrantOf(t, dial(t, srv)) },
		})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			return readWriteOf(t, dial(t, srv), turnstile.WithWriterClaim(500*time.Millisecond))
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				s := semaphoreOf(t, dial(t, srv), 3)
				return s
			},
			Plain: func(t testing.TB) driver.Backend { return dial(t, srv) },
		}, 3)
	})
	t.Run("Fair", func(t *testing.T) {
		locktest.RunFair(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				f := fairOf(t, dial(t, srv))
				return f
			},
			URL:  srv.URL(),
			View: "redis-fair",
			Waiting: func(t testing.TB, key string) int {
				return atoi(t, srv.MustDo(t, "ZCARD", lockKey(key)+":queue"))
			},
			// Retry on the plain lock, queue in the Fair view.
			Plain: func(t testing.TB) driver.Backend { return dial(t, srv) },
		})
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
