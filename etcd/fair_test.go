package etcd_test

import (
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestFair runs the fair lock's cases: etcd queues waiters by the
// revision of their waiter keys and serves them in order.
func TestFair(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	locktest.RunFair(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend { return dial(t, srv) },
		URL: srv.URL(),
		Waiting: func(t testing.TB, key string) int {
			// The documented queue directory of key (default prefix).
			dir := etcd.DefaultPrefix + "queue/" + url.PathEscape(key) + "/"
			r, err := raw.Get(ctxFor(t, 5*time.Second), dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatalf("count waiters of %q: %v", key, err)
			}
			return int(r.Count)
		},
	})
}
