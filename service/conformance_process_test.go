//go:build !race

// The suites through a real "turnstile serve" are thousands of calls
// over HTTP/2: too slow under the race detector, which the in-process
// cases of the instance's code run under instead.

package service_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func init() {
	// The fair cases' child processes open the plain backend from the
	// URL and wait through its fair view, as the parent does.
	locktest.RegisterView("service-fair", func(b driver.Backend) (driver.Backend, error) {
		return b.(driver.Fairer).FairView(driver.KindConfig{})
	})
}

// redisLockKey is the redis package's documented key of the lock on key.
func redisLockKey(key string) string {
	if strings.HasPrefix(key, "}") || strings.HasPrefix(key, `\`) {
		key = `\` + key
	}
	return "{" + key + "}"
}

// TestServeRedis runs every conformance suite — the plain lock with its
// inspection and elections, and each lock kind — through a real
// "turnstile serve" process over a real redis-server.
func TestServeRedis(t *testing.T) {
	srv := testserver.StartRedis(t)
	p := startServe(t, "--backend", srv.URL())
	plain := func(t testing.TB) driver.Backend { return dial(t, "turnstile://"+p.addr) }
	t.Run("Lock", func(t *testing.T) {
		locktest.Run(t, locktest.Harness{
			New:   plain,
			URL:   "turnstile://" + p.addr,
			Evict: func(t testing.TB, key string) { srv.MustDo(t, "DEL", redisLockKey(key)) },
		})
	})
	runKinds(t, plain)
	t.Run("Fair", func(t *testing.T) {
		locktest.RunFair(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				f, err := plain(t).(driver.Fairer).FairView(driver.KindConfig{})
				if err != nil {
					t.Fatal(err)
				}
				return f
			},
			URL:  "turnstile://" + p.addr,
			View: "service-fair",
			Waiting: func(t testing.TB, key string) int {
				n, err := strconv.Atoi(srv.MustDo(t, "ZCARD", redisLockKey(key)+":queue"))
				if err != nil {
					t.Fatal(err)
				}
				return n
			},
			Plain: plain,
		})
	})
}

// TestServeEtcd runs the conformance suites through a real "turnstile
// serve" process over a real etcd, whose own queue the service waits in.
func TestServeEtcd(t *testing.T) {
	srv := testserver.StartEtcd(t)
	p := startServe(t, "--backend", srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := etcd.Dial(ctx, clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	plain := func(t testing.TB) driver.Backend { return dial(t, "turnstile://"+p.addr) }
	t.Run("Lock", func(t *testing.T) {
		locktest.Run(t, locktest.Harness{
			New: plain,
			URL: "turnstile://" + p.addr,
			Evict: func(t testing.TB, key string) {
				if _, err := raw.Client().Delete(ctxFor(t, 5*time.Second), raw.LockKey(key)); err != nil {
					t.Fatalf("evict %q: %v", key, err)
				}
			},
			// etcd leases count whole seconds, at least 2.
			TTL: 2 * time.Second,
		})
	})
	runKinds(t, plain)
	t.Run("Fair", func(t *testing.T) {
		locktest.RunFair(t, locktest.Harness{
			New: plain,
			URL: "turnstile://" + p.addr,
			Waiting: func(t testing.TB, key string) int {
				dir := etcd.DefaultPrefix + "queue/" + url.PathEscape(key) + "/"
				r, err := raw.Client().Get(ctxFor(t, 5*time.Second), dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatalf("count waiters of %q: %v", key, err)
				}
				return int(r.Count)
			},
		})
	})
}

// runKinds runs the reentrant, read-write and semaphore suites on the
// views of the plain backend plain returns.
func runKinds(t *testing.T, plain func(testing.TB) driver.Backend) {
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{New: func(t testing.TB) driver.Backend {
			b, err := plain(t).(driver.Reentranter).ReentrantView(driver.KindConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			r, w, err := plain(t).(driver.ReadWriter).ReadWriteView(driver.KindConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return r, w
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				s, err := plain(t).(driver.Semaphorer).SemaphoreView(driver.KindConfig{Permits: 3})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			Plain: plain,
		}, 3)
	})
}
