package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
	"github.com/turnstilelock/turnstile/redlock"
)

// The ACL user of the TLS tests, on every node. No error may show its
// password.
const (
	tlsUser = "locker"
	tlsPass = "QJZVWKredlockPassKWVZJQ"
)

var secrets = tlstest.Secrets{"QJZVWK"}

// startTLSNodes starts n redis-server processes speaking TLS only, with
// the certificates of certs and client certificates required, each with
// the ACL user tlsUser.
func startTLSNodes(t *testing.T, certs *testcerts.Set, n int) []*testserver.Redis {
	t.Helper()
	srvs := make([]*testserver.Redis, n)
	for i := range srvs {
		srvs[i] = testserver.StartRedisTLS(t, certs, true)
		srvs[i].MustDo(t, "ACL", "SETUSER", tlsUser, "on", ">"+tlsPass, "~*", "&*", "+@all")
	}
	return srvs
}

// tlsRedlockURL is the URL of a Redlock over srvs as tlsUser, with
// query, restarted nodes not quarantined and a node timeout a busy
// machine meets.
func tlsRedlockURL(srvs []*testserver.Redis, query string) string {
	return "redlock://" + tlsUser + ":" + tlsPass + "@" + strings.Join(addrs(srvs), ",") + "?quarantine=0&node_timeout=300ms&dial_timeout=2s&" + query
}

// tlsQuery is a query of name=value pairs, the values escaped.
var tlsQuery = tlstest.Query

// TestTLSRedlock: a Redlock over three servers that speak TLS only and
// require client certificates, as an ACL user (password in the URL or in
// password_file): locks are taken on every node, a held one is refused
// to another client, and the next holder's fencing token is greater.
func TestTLSRedlock(t *testing.T) {
	certs := testcerts.New(t)
	srvs := startTLSNodes(t, certs, 3)
	files := tlsQuery("ca_file", certs.CA, "cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	pwFile := tlstest.PasswordFile(t, tlsPass)
	for name, u := range map[string]string{
		"Password":     tlsRedlockURL(srvs, files),
		"PasswordFile": strings.Replace(tlsRedlockURL(srvs, files+"&"+tlsQuery("password_file", pwFile)), ":"+tlsPass+"@", "@", 1),
		"ServerName":   tlsRedlockURL(srvs, files+"&tls=on&server_name=localhost"),
	} {
		t.Run(name, func(t *testing.T) {
			// Every node grants it over TLS; the acquisition returns at a
			// quorum, so the last grant may land a moment later.
			onEveryNode := func(key string) {
				for i, s := range srvs {
					deadline := time.Now().Add(10 * time.Second)
					for s.MustDo(t, "EXISTS", "{"+key+"}") != "1" {
						if time.Now().After(deadline) {
							t.Fatalf("node %d: lock key {%s} still missing 10 s after the acquisition; want it on every node", i+1, key)
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			}
			tlstest.LockAndFence(t, u, onEveryNode, "tls-"+name)
		})
	}
	t.Run("WrongServerName", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsRedlockURL(srvs, files+"&server_name=redis.example.com"))
		tlstest.WantIn(t, err, "redis.example.com", "x509")
	})
}

// TestTLSRedlockRefusals: what a Redlock client that does not match its
// servers' TLS is told: a certificate of another authority, no client
// certificate, plain text to TLS ports, TLS to plain-text ports. No
// error shows the password.
func TestTLSRedlockRefusals(t *testing.T) {
	certs := testcerts.New(t)
	srvs := startTLSNodes(t, certs, 3)
	client := tlsQuery("cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	t.Run("WrongCA", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsRedlockURL(srvs, tlsQuery("ca_file", certs.OtherCA)+"&"+client))
		tlstest.WantIn(t, err, srvs[0].Addr(), "certificate signed by unknown authority")
		if !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("error is not ErrNoQuorum, or is ErrInvalidURL: %v", err)
		}
	})
	t.Run("SystemRoots", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsRedlockURL(srvs, "tls=on&"+client))
		tlstest.WantIn(t, err, "x509")
	})
	t.Run("NoClientCert", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsRedlockURL(srvs, tlsQuery("ca_file", certs.CA)))
		tlstest.WantIn(t, err, "client certificate", "cert_file")
	})
	t.Run("PlainToTLSPorts", func(t *testing.T) {
		err := secrets.OpenFails(t, 30*time.Second, tlsRedlockURL(srvs, "tls=off"))
		tlstest.WantIn(t, err, srvs[0].Addr(), "tls=on", "ca_file")
	})
	t.Run("TLSToPlainPorts", func(t *testing.T) {
		plain := []*testserver.Redis{testserver.StartRedis(t), testserver.StartRedis(t), testserver.StartRedis(t)}
		err := secrets.OpenFails(t, 30*time.Second, strings.Replace(tlsRedlockURL(plain, tlsQuery("ca_file", certs.CA)+"&"+client), "dial_timeout=2s", "dial_timeout=1s", 1))
		tlstest.WantIn(t, err, plain[0].Addr(), "TLS handshake", "plain text")
	})
}

// TestTLSRedlockBadParams: every bad TLS or password parameter is a bad
// URL before anything is dialled (nothing listens on the ports).
func TestTLSRedlockBadParams(t *testing.T) {
	certs := testcerts.New(t)
	nodes := "redlock://" + tlsUser + ":" + tlsPass + "@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?"
	for _, c := range []struct{ query, want string }{
		{tlsQuery("ca_file", certs.Missing), "ca_file"},
		{tlsQuery("ca_file", certs.ClientKey), "ca_file"},
		{tlsQuery("cert_file", certs.ClientCert), "key_file"},
		{tlsQuery("key_file", certs.ClientKey), "cert_file"},
		{tlsQuery("cert_file", certs.ClientCert, "key_file", certs.ServerKey), "cert_file"},
		{tlsQuery("server_name", "bad name"), "server_name"},
		{tlsQuery("tls", "yes please"), "tls"},
		{tlsQuery("tls", "off", "ca_file", certs.CA), "ca_file needs TLS"},
		{tlsQuery("password_file", certs.Missing), "password_file"},
	} {
		u := nodes + c.query
		if err := secrets.InvalidURL(t, u, c.want); strings.Contains(err.Error(), "connect") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL before any connection", u, err)
		}
	}
}
