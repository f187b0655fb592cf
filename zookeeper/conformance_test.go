package zookeeper_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) { locktest.Run(t, harness(t)) }

// TestFair runs the fair lock's cases: a ZooKeeper lock is a queue of
// sequential nodes, served in order.
func TestFair(t *testing.T) { locktest.RunFair(t, harness(t)) }

// harness is the suites' harness of the test server: backends dialled
// to it, its URL, an eviction that deletes the key's first node, and a
// count of the nodes in the key's queue.
func harness(t *testing.T) locktest.Harness {
	paths := dial(t) // only to name the key's directory
	op := rawConn(t)
	return locktest.Harness{
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
		Waiting: func(t testing.TB, key string) int {
			return len(queue(t, op, paths.Dir(key)))
		},
		// The timing cases' TTLs are kept by the holder's own timer; the
		// crash case waits for the killed child's session (2 s) to expire.
		TTL: 500 * time.Millisecond,
	}
}
