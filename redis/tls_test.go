package redis_test

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
)

// The ACL user of the TLS tests. No error may show its password.
const (
	tlsUser = "locker"
	tlsPass = "QJZVWKtlsPasswordKWVZJQ"
)

var secrets = tlstest.Secrets{tlsPass, "QJZVWK"}

// startTLS starts redis-server speaking TLS only, with the certificates
// of certs, and the ACL user tlsUser.
func startTLS(t *testing.T, certs *testcerts.Set, authClients bool) *testserver.Redis {
	t.Helper()
	srv := testserver.StartRedisTLS(t, certs, authClients)
	addUser(t, srv.Do)
	return srv
}

// addUser creates tlsUser with tlsPass through do.
func addUser(t *testing.T, do func(...string) (string, error)) {
	t.Helper()
	if _, err := do("ACL", "SETUSER", tlsUser, "on", ">"+tlsPass, "~*", "&*", "+@all"); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
}

// tlsURL is a URL of scheme for hosts with the user's password and
// query.
func tlsURL(scheme, hosts, query string) string {
	return scheme + "://" + tlsUser + ":" + tlsPass + "@" + hosts + "?" + query
}

// q is a query of name=value pairs, the values escaped.
var q = tlstest.Query

// TestTLSLockAndFence: over rediss:// to a server that requires client
// certificates, an ACL user (password in the URL or in password_file)
// takes and releases locks and gets increasing fencing tokens; a server
// that asks for no client certificate takes ca_file alone, and
// server_name names what the server's certificate must carry.
func TestTLSLockAndFence(t *testing.T) {
	certs := testcerts.New(t)
	srv := startTLS(t, certs, true)
	files := q("ca_file", certs.CA, "cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	t.Run("Password", func(t *testing.T) {
		tlstest.LockAndFence(t, tlsURL("rediss", srv.Addr(), files), nil, "tls:a", "tls:b")
	})
	t.Run("PasswordFile", func(t *testing.T) {
		u := "rediss://" + tlsUser + "@" + srv.Addr() + "?" + files + "&" + q("password_file", tlstest.PasswordFile(t, tlsPass))
		tlstest.LockAndFence(t, u, nil, "tls:c")
	})
	t.Run("RedisSchemeWithTLSParams", func(t *testing.T) {
		tlstest.LockAndFence(t, tlsURL("redis", srv.Addr(), files+"&protocol=2"), nil, "tls:d")
	})
	t.Run("ServerName", func(t *testing.T) {
		tlstest.LockAndFence(t, tlsURL("rediss", srv.Addr(), files+"&server_name=localhost"), nil, "tls:e")
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("rediss", srv.Addr(), files+"&server_name=redis.example.com"))
		tlstest.WantIn(t, err, "redis.example.com", "x509")
	})
	t.Run("NoClientAuth", func(t *testing.T) {
		open := startTLS(t, certs, false)
		tlstest.LockAndFence(t, tlsURL("rediss", open.Addr(), q("ca_file", certs.CA)), nil, "tls:f")
	})
	t.Run("WrongPassword", func(t *testing.T) {
		u := "rediss://" + tlsUser + ":QJZVWKwrongKWVZJQ@" + srv.Addr() + "?" + files
		err := secrets.OpenFails(t, 30*time.Second, u)
		if strings.Contains(err.Error(), "wrongKWV") {
			t.Errorf("error shows the password: %v", err)
		}
		tlstest.WantIn(t, err, "WRONGPASS")
	})
}

// TestTLSCluster: every node of a Redis Cluster that speaks TLS only is
// reached with the URL's TLS configuration, from the list of nodes or
// from one of them.
func TestTLSCluster(t *testing.T) {
	certs := testcerts.New(t)
	cl := testserver.StartRedisClusterTLS(t, certs, true)
	t.Cleanup(func() { waitDeferredCloses(t) })
	addUser(t, cl.Do)
	for _, a := range cl.Addrs()[1:] {
		// ACL users are each node's own.
		addUser(t, func(args ...string) (string, error) { return doOn(t, cl, a, args...) })
	}
	files := q("ca_file", certs.CA, "cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	// Keys whose locks fall in slots of each of the three nodes.
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for name, u := range map[string]string{
		"List":       tlsURL("rediss", strings.Join(cl.Addrs(), ","), files),
		"OneNode":    tlsURL("rediss", cl.Addrs()[1], files),
		"ServerName": tlsURL("rediss", strings.Join(cl.Addrs(), ","), files+"&server_name=localhost"),
	} {
		t.Run(name, func(t *testing.T) {
			tlstest.LockAndFence(t, u, nil, keys...)
			c, err := turnstile.Open(ctxFor(t, time.Minute), u)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The client found every node, over TLS: they listen on no
			// other port.
			name := c.Backend().(driver.Namer).Name()
			for _, a := range cl.Addrs() {
				if !strings.Contains(name, a) {
					t.Errorf("backend %q does not name node %s", name, a)
				}
			}
		})
	}
	t.Run("WrongCA", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("rediss", strings.Join(cl.Addrs(), ","), q("ca_file", certs.OtherCA, "cert_file", certs.ClientCert, "key_file", certs.ClientKey)))
		tlstest.WantIn(t, err, "certificate signed by unknown authority")
	})
}

// doOn runs a command on the node of cl at addr.
func doOn(t *testing.T, cl *testserver.RedisCluster, addr string, args ...string) (string, error) {
	t.Helper()
	for _, n := range cl.Nodes() {
		if n.Addr() == addr {
			return n.Do(args...)
		}
	}
	t.Fatalf("no node %s", addr)
	return "", nil
}

// TestTLSRefusals: what a client that does not match the server's TLS
// is told, by a real server: a certificate of another authority, no
// client certificate where one is required, plain text to the TLS port
// and TLS to a plain-text port. No error shows the password.
func TestTLSRefusals(t *testing.T) {
	certs := testcerts.New(t)
	srv := startTLS(t, certs, true)
	client := q("cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	t.Run("WrongCA", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("rediss", srv.Addr(), q("ca_file", certs.OtherCA)+"&"+client))
		tlstest.WantIn(t, err, srv.Addr(), "certificate signed by unknown authority")
		if ua := (x509.UnknownAuthorityError{}); !errors.As(err, &ua) {
			t.Errorf("error is no x509.UnknownAuthorityError: %v", err)
		}
		if errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("a server the CA did not sign is not a malformed URL: %v", err)
		}
	})
	t.Run("SystemRoots", func(t *testing.T) {
		// rediss:// alone trusts the system's authorities, which did not
		// sign the test server's certificate.
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("rediss", srv.Addr(), client))
		tlstest.WantIn(t, err, "x509")
	})
	t.Run("NoClientCert", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("rediss", srv.Addr(), q("ca_file", certs.CA)))
		tlstest.WantIn(t, err, srv.Addr(), "client certificate", "cert_file")
	})
	t.Run("PlainToTLSPort", func(t *testing.T) {
		start := time.Now()
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("redis", srv.Addr(), "dial_timeout=2s"))
		tlstest.WantIn(t, err, srv.Addr(), "rediss://", "ca_file")
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("took %v", took)
		}
	})
	t.Run("TLSToPlainPort", func(t *testing.T) {
		plain := testserver.StartRedis(t)
		addUser(t, plain.Do)
		err := secrets.OpenFails(t, 30*time.Second, tlsURL("rediss", plain.Addr(), q("ca_file", certs.CA)+"&"+client+"&dial_timeout=1s"))
		tlstest.WantIn(t, err, plain.Addr(), "TLS handshake", "plain text", "redis://")
	})
}

// TestTLSBadParams: every bad TLS or password parameter is a bad URL,
// reported before anything is dialled (nothing listens on the port),
// and no error shows the password.
func TestTLSBadParams(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "unreadable.pem")
	if err := os.WriteFile(unreadable, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	emptyPW := filepath.Join(dir, "empty-password")
	if err := os.WriteFile(emptyPW, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ query, want string }{
		{q("ca_file", certs.Missing), "ca_file"},
		{q("ca_file", certs.NotPEM), "ca_file"},
		{q("ca_file", certs.ClientKey), "ca_file"},
		{"ca_file=", "ca_file"},
		{q("ca_file", certs.CA, "ca_file", certs.CA), "ca_file"},
		{q("cert_file", certs.ClientCert), "key_file"},
		{q("key_file", certs.ClientKey), "cert_file"},
		{q("cert_file", certs.Missing, "key_file", certs.ClientKey), "cert_file"},
		{q("cert_file", certs.ClientCert, "key_file", certs.Missing), "key_file"},
		{q("cert_file", certs.NotPEM, "key_file", certs.ClientKey), "cert_file"},
		{q("cert_file", certs.ClientCert, "key_file", certs.ServerKey), "cert_file"},
		{q("server_name", "bad name"), "server_name"},
		{q("server_name", "h:1"), "server_name"},
		{"server_name=", "server_name"},
		{q("tls", "on"), "tls"},
	} {
		for _, scheme := range []string{"redis", "rediss"} {
			u := tlsURL(scheme, "127.0.0.1:1", c.query)
			t.Run(scheme+"?"+c.query, func(t *testing.T) { badURL(t, u, c.want) })
		}
	}
	if os.Geteuid() != 0 { // root reads any file
		badURL(t, tlsURL("rediss", "127.0.0.1:1", q("ca_file", unreadable)), "ca_file")
	}
	for _, u := range []string{
		"rediss://" + tlsUser + "@127.0.0.1:1?" + q("password_file", certs.Missing),
		"rediss://" + tlsUser + "@127.0.0.1:1?" + q("password_file", emptyPW),
		tlsURL("rediss", "127.0.0.1:1", q("password_file", tlstest.PasswordFile(t, tlsPass))),
	} {
		badURL(t, u, "password_file")
	}
}

// badURL opens u, which must fail as a bad URL at once, saying want,
// without dialling.
func badURL(t *testing.T, u, want string) {
	t.Helper()
	err := secrets.InvalidURL(t, u, want)
	// A dial of 127.0.0.1:1 would say "connect" or "refused".
	if msg := err.Error(); strings.Contains(msg, "refused") || strings.Contains(msg, "connect to") {
		t.Errorf("Open(%s) dialled: %v", u, err)
	}
}

// waitDeferredCloses waits until rueidis has closed the connections
// that a topology refresh replaced, which it does 5 s later in a
// goroutine of its own (when a redirection raced the refresh), so that
// the package's goroutine check does not take it for a leak.
func waitDeferredCloses(t *testing.T) {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "rueidis.(*clusterClient)._refresh.func") {
			return
		}
	}
	t.Log("rueidis still holds replaced connections after 15 s")
}
