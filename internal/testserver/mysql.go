package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/proctest"
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

// dataDir is a temporary directory for the server's data, in memory
// where /dev/shm exists: on a busy disk a commit can stall longer than
// the short lease TTLs the conformance suite uses.
func dataDir(t testing.TB) string { return proctest.MemDir(t, "turnstile-mysql") }

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
