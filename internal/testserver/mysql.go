package testserver

import (
	"os"
	"testing"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
)

// MySQL is a private mariadbd process started for a test.
type MySQL struct {
	*mysqlproc.Server
	t testing.TB
}

// StartMySQL starts mariadbd on a free loopback port with a fresh data
// directory, a user and a database (mysqlproc.User, .Database), and stops
// it when the test (or benchmark) ends.
func StartMySQL(t testing.TB) *MySQL {
	t.Helper()
	s, err := mysqlproc.Start(dataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill(); s.Remove() })
	return &MySQL{Server: s, t: t}
}

// Restart kills the server and starts it again with the same data, as
// after a crash; it fails the test if the server does not come back.
func (m *MySQL) Restart() {
	m.t.Helper()
	if err := m.Server.Restart(); err != nil {
		m.t.Fatal(err)
	}
}

// dataDir is a temporary directory for the server's data (see memDir).
func dataDir(t testing.TB) string { return memDir(t, "turnstile-mysql") }

// memDir is a temporary directory named prefix…, removed when the test
// ends, in memory where /dev/shm exists: on a busy disk a commit can
// stall longer than the short lease TTLs the conformance suite uses.
func memDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", prefix)
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// StartMySQLWith is StartMySQL with TLS as o says (see
// mysqlproc.Options); the server's certificates are in its Certs.
func StartMySQLWith(t testing.TB, o mysqlproc.Options) *MySQL {
	t.Helper()
	s, err := mysqlproc.StartWith(dataDir(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill(); s.Remove() })
	return &MySQL{Server: s, t: t}
}
