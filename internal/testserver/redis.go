// Package testserver starts real servers for tests: each on a free
// loopback port, in a temporary directory, stopped when the test ends. A
// missing server binary fails the test with the command that installs it.
package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// InstallHint is the command that installs every server the tests use.
const InstallHint = redisproc.InstallHint

// Redis is a redis-server process started for a test.
type Redis struct {
	*redisproc.Server
	t testing.TB
}

// StartRedis starts redis-server on a free loopback port with persistence
// off, and stops it when the test (or benchmark) ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	s, err := redisproc.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return &Redis{Server: s, t: t}
}

// Restart kills the server and starts it again on the same port with an
// empty data set; it fails the test if the server does not come back.
func (r *Redis) Restart() {
	r.t.Helper()
	if err := r.Server.Restart(); err != nil {
		r.t.Fatal(err)
	}
}
