package etcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) { locktest.Run(t, harness(t)) }

// TestFair runs the fair lock's cases: etcd queues waiters by the
// revision of their waiter keys and serves them in order.
func TestFair(t *testing.T) { locktest.RunFair(t, harness(t)) }

// harness starts a server for the test and returns the suites' harness
// of it: backends dialled to it, its URL, an eviction that deletes the
// lock key, and a count of the keys in key's queue directory.
func harness(t *testing.T) locktest.Harness {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	return locktest.Harness{
		New: func(t testing.TB) driver.Backend { return dial(t, srv) },
		URL: srv.URL(),
		Evict: func(t testing.TB, key string) {
			if _, err := raw.Delete(ctxFor(t, 5*time.Second), lockKey(key)); err != nil {
				t.Fatalf("evict %q: %v", key, err)
			}
		},
		Waiting: func(t testing.TB, key string) int {
			r, err := raw.Get(ctxFor(t, 5*time.Second), queueDir(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatalf("count waiters of %q: %v", key, err)
			}
			return int(r.Count)
		},
		// etcd leases count whole seconds and are at least 2 s with
		// default server flags.
		TTL: 2 * time.Second,
	}
}
