package zookeeper_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) {
	paths := dial(t) // only to name the key's directory
	op := rawConn(t)
	locktest.Run(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend { return dial(t) },
		URL: serverURL(),
		Evict: func(t testing.TB, key string) {
			dir := paths.Dir(key)
			q := queue(t, op, dir)
			if len(q) == 0 {
				t.Fatalf("evict %q: nobody holds it", key)
			}
			if err := op.Delete(dir+"/"+q[0], -1); err != nil {
				t.Fatalf("evict %q: %v", key, err)
			}
		},
		// The timing cases' TTLs are kept by the holder's own timer; the
		// crash case waits for the killed child's session (2 s) to expire.
		TTL: 500 * time.Millisecond,
	})
}
