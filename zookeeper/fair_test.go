package zookeeper_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestFair runs the fair lock's cases: a ZooKeeper lock is a queue of
// sequential nodes, served in order.
func TestFair(t *testing.T) {
	paths := dial(t) // only to name the key's directory
	op := rawConn(t)
	locktest.RunFair(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend { return dial(t) },
		URL: serverURL(),
		Waiting: func(t testing.TB, key string) int {
			return len(queue(t, op, paths.Dir(key)))
		},
	})
}
