package redis_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) {
	srv := testserver.StartRedis(t)
	evict := func(t testing.TB, key string) { srv.MustDo(t, "DEL", lockKey(key)) }

	t.Run("rueidis", func(t *testing.T) {
		locktest.Run(t, locktest.Harness{
			New:   func(t testing.TB) driver.Backend { return dial(t, srv) },
			URL:   srv.URL(),
			Evict: evict,
		})
	})
	t.Run("go-redis", func(t *testing.T) {
		locktest.Run(t, locktest.Harness{
			New:   func(t testing.TB) driver.Backend { return goRedisBackend(t, srv) },
			URL:   srv.URL(),
			Evict: evict,
		})
	})
}
