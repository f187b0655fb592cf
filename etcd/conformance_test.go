package etcd_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	locktest.Run(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend { return dial(t, srv) },
		URL: srv.URL(),
		Evict: func(t testing.TB, key string) {
			if _, err := raw.Delete(ctxFor(t, 5*time.Second), lockKey(key)); err != nil {
				t.Fatalf("evict %q: %v", key, err)
			}
		},
		// etcd leases count whole seconds and are at least 2 s with
		// default server flags.
		TTL: 2 * time.Second,
	})
}
