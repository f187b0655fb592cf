package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/proctest"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// Etcd is a single-member etcd process started for a test.
type Etcd struct {
	*etcdproc.Server
}

// StartEtcd starts etcd on free loopback client and peer ports and stops
// it when the test (or benchmark) ends. A missing binary fails the test
// with the install hint.
//
// The data directory is on /dev/shm when that is a writable tmpfs: etcd
// fsyncs its log on every write, and on a disk that halves the throughput
// the tests need. Durability across a machine crash is nothing the tests
// check.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	s, err := etcdproc.Start(etcdDataDir(t))
	return &Etcd{Server: started(t, s, err)}
}

// etcdDataDir is a temporary directory for etcd's data, in memory where
// /dev/shm exists (see proctest.MemDir).
func etcdDataDir(t testing.TB) string { return proctest.MemDir(t, "turnstile-etcd-") }

// StartEtcdTLS starts etcd as StartEtcd does, serving clients over TLS
// only with certs' server certificate and requiring client certificates
// signed by certs' authority (--cert-file, --key-file, --trusted-ca-file,
// --client-cert-auth). Its URL names the authority and the client
// certificate.
func StartEtcdTLS(t testing.TB, certs *testcerts.Set) *Etcd {
	t.Helper()
	s, err := etcdproc.StartTLS(etcdDataDir(t), certs)
	return &Etcd{Server: started(t, s, err)}
}
