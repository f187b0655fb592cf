// Package testserver starts real servers for tests: each on a free
// loopback port, in a temporary directory, stopped when the test ends. A
// missing server binary fails the test with the command that installs it.
package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// InstallHint is the command that installs every server the tests use.
const InstallHint = redisproc.InstallHint

// Redis is a redis-server process started for a test.
type Redis struct {
	*redisproc.Server
	t testing.TB
}

// started fails t with err, if any, and otherwise kills s when the test
// (or benchmark) ends; it returns s.
func started[S interface{ Kill() }](t testing.TB, s S, err error) S {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// StartRedis starts redis-server on a free loopback port with persistence
// off, and stops it when the test (or benchmark) ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	s, err := redisproc.Start(t.TempDir())
	return &Redis{Server: started(t, s, err), t: t}
}

// Restart kills the server and starts it again on the same port with an
// empty data set; it fails the test if the server does not come back.
func (r *Redis) Restart() {
	r.t.Helper()
	if err := r.Server.Restart(); err != nil {
		r.t.Fatal(err)
	}
}

// StartRedisTLS starts redis-server as StartRedis does, speaking TLS
// only (--port 0 --tls-port P) with the server certificate of certs;
// with authClients it refuses clients without a certificate signed by
// certs' authority (--tls-auth-clients yes). Its URL is rediss:// with
// ca_file, cert_file and key_file.
func StartRedisTLS(t testing.TB, certs *testcerts.Set, authClients bool) *Redis {
	t.Helper()
	s, err := redisproc.StartTLS(t.TempDir(), RedisTLS(certs, authClients))
	return &Redis{Server: started(t, s, err), t: t}
}

// RedisTLS is the redis-server TLS of certs: its server certificate, its
// authority, and its client certificate for the clients.
func RedisTLS(certs *testcerts.Set, authClients bool) redisproc.TLS {
	return redisproc.TLS{
		CA:         certs.CA,
		ServerCert: certs.ServerCert, ServerKey: certs.ServerKey,
		ClientCert: certs.ClientCert, ClientKey: certs.ClientKey,
		AuthClients: authClients,
	}
}
