package fallback_test

import (
	"time"

	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestConformance runs the suite on fallback(redis, postgres) with a
// healthy primary. The pair has no URL scheme, so the multi-process case
// does not apply.
func TestConformance(t *testing.T) {
	srv := testserver.StartRedis(t)
	secondary := dialPostgres(t)
	locktest.Run(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend {
			b, err := fallback.New(dialRedis(t, srv), secondary, fallback.WithGrace(2*time.Minute))
			if err != nil {
				t.Fatalf("fallback.New: %v", err)
			}
			return b
		},
		// An operator deletes the lock in the primary, which holds it.
		Evict: func(t testing.TB, key string) {
			if _, err := srv.Do("DEL", "{"+key+"}"); err != nil {
				t.Fatalf("evict %q: %v", key, err)
			}
		},
	})
}
