package postgres_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) {
	inspect := sqlConn(t, srv)
	locktest.Run(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend { return dial(t, srv) },
		URL: srv.URL(),
		// An operator clears the row: the holder finds out at its next
		// renewal and gives up the advisory lock too.
		Evict: func(t testing.TB, key string) {
			_, err := inspect.Exec(ctxFor(t, 5e9), `UPDATE turnstile_locks SET owner = '', expires_at = '-infinity' WHERE key = $1`, key)
			if err != nil {
				t.Fatalf("evict %q: %v", key, err)
			}
		},
	})
}
