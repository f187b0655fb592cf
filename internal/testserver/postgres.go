package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/pgproc"
)

// Postgres is a PostgreSQL server started for a test.
type Postgres struct {
	*pgproc.Server
}

// StartPostgres initialises a cluster and runs postgres on a free loopback
// port with fsync off, and stops it (removing its files) when the test or
// benchmark ends.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	s, err := pgproc.Start()
	return &Postgres{Server: started(t, s, err)}
}

// StartPostgresWith is StartPostgres with the TLS and client
// authentication that o asks for (see pgproc.Options); the server's
// certificates are in its Certs.
func StartPostgresWith(t testing.TB, o pgproc.Options) *Postgres {
	t.Helper()
	s, err := pgproc.StartWith(o)
	return &Postgres{Server: started(t, s, err)}
}
