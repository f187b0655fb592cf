package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/zkproc"
)

// ZooKeeper is a standalone ZooKeeper server started for a test.
type ZooKeeper struct {
	*zkproc.Server
}

// StartZooKeeper starts a standalone ZooKeeper server on a free loopback
// port with its data in a temporary directory, and stops it when the test
// (or benchmark) ends. Starting the JVM takes a second or two: start one
// server per test package, in TestMain or a shared helper.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	s, err := zkproc.Start(t.TempDir())
	return &ZooKeeper{Server: started(t, s, err)}
}

// StartZooKeeperTLS starts a standalone ZooKeeper server as
// StartZooKeeper does, with a second client port, TLSAddr, that speaks
// TLS only with certs' server certificate and requires client
// certificates signed by certs' authority.
func StartZooKeeperTLS(t testing.TB, certs *testcerts.Set) *ZooKeeper {
	t.Helper()
	s, err := zkproc.StartTLS(t.TempDir(), certs)
	return &ZooKeeper{Server: started(t, s, err)}
}
