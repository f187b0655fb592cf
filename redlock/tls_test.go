package redlock_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redlock"
)

// The ACL user of the TLS tests, on every node. No error may show its
// password.
const (
	tlsUser = "locker"
	tlsPass = "QJZVWKredlockPassKWVZJQ"
)

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
func tlsQuery(pairs ...string) string {
	v := make([]string, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		v = append(v, pairs[i]+"="+url.QueryEscape(pairs[i+1]))
	}
	return strings.Join(v, "&")
}

// openErr opens u, which must fail, and returns the error, having
// checked that it does not show the password.
func openErr(t *testing.T, u string) error {
	t.Helper()
	c, err := turnstile.Open(ctxFor(t, 30*time.Second), u)
	if err == nil {
		_ = c.Close()
		t.Fatalf("Open(%s) succeeded", u)
	}
	if strings.Contains(err.Error(), "QJZVWK") {
		t.Errorf("error shows the password: %v", err)
	}
	t.Logf("%v", err)
	return err
}

// wantIn fails t unless err's message contains every one of want.
func wantIn(t *testing.T, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// TestTLSRedlock: a Redlock over three servers that speak TLS only and
// require client certificates, as an ACL user (password in the URL or in
// password_file): locks are taken on every node, a held one is refused
// to another client, and the next holder's fencing token is greater.
func TestTLSRedlock(t *testing.T) {
	certs := testcerts.New(t)
	srvs := startTLSNodes(t, certs, 3)
	files := tlsQuery("ca_file", certs.CA, "cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(tlsPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, u := range map[string]string{
		"Password":     tlsRedlockURL(srvs, files),
		"PasswordFile": strings.Replace(tlsRedlockURL(srvs, files+"&"+tlsQuery("password_file", pwFile)), ":"+tlsPass+"@", "@", 1),
		"ServerName":   tlsRedlockURL(srvs, files+"&tls=on&server_name=localhost"),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			c, err := turnstile.Open(ctx, u)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer c.Close()
			other, err := turnstile.Open(ctx, u)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer other.Close()
			key := "tls-" + name
			l, err := c.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			// Every node grants it over TLS; the acquisition returns at a
			// quorum, so the last grant may land a moment later.
			for i, s := range srvs {
				deadline := time.Now().Add(10 * time.Second)
				for s.MustDo(t, "EXISTS", "{"+key+"}") != "1" {
					if time.Now().After(deadline) {
						t.Fatalf("node %d: lock key {%s} still missing 10 s after the acquisition; want it on every node", i+1, key)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if l2, err := other.TryAcquire(ctx, key); !errors.Is(err, turnstile.ErrNotAcquired) {
				if l2 != nil {
					_ = l2.Release(ctx)
				}
				t.Fatalf("a second client's TryAcquire of a held lock = %v, want ErrNotAcquired", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			l2, err := other.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire after release: %v", err)
			}
			if l2.Token() <= l.Token() {
				t.Errorf("fencing token %d after %d: want it greater", l2.Token(), l.Token())
			}
			if err := l2.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	t.Run("WrongServerName", func(t *testing.T) {
		err := openErr(t, tlsRedlockURL(srvs, files+"&server_name=redis.example.com"))
		wantIn(t, err, "redis.example.com", "x509")
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
		err := openErr(t, tlsRedlockURL(srvs, tlsQuery("ca_file", certs.OtherCA)+"&"+client))
		wantIn(t, err, srvs[0].Addr(), "certificate signed by unknown authority")
		if !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("error is not ErrNoQuorum, or is ErrInvalidURL: %v", err)
		}
	})
	t.Run("SystemRoots", func(t *testing.T) {
		err := openErr(t, tlsRedlockURL(srvs, "tls=on&"+client))
		wantIn(t, err, "x509")
	})
	t.Run("NoClientCert", func(t *testing.T) {
		err := openErr(t, tlsRedlockURL(srvs, tlsQuery("ca_file", certs.CA)))
		wantIn(t, err, "client certificate", "cert_file")
	})
	t.Run("PlainToTLSPorts", func(t *testing.T) {
		err := openErr(t, tlsRedlockURL(srvs, "tls=off"))
		wantIn(t, err, srvs[0].Addr(), "tls=on", "ca_file")
	})
	t.Run("TLSToPlainPorts", func(t *testing.T) {
		plain := []*testserver.Redis{testserver.StartRedis(t), testserver.StartRedis(t), testserver.StartRedis(t)}
		err := openErr(t, strings.Replace(tlsRedlockURL(plain, tlsQuery("ca_file", certs.CA)+"&"+client), "dial_timeout=2s", "dial_timeout=1s", 1))
		wantIn(t, err, plain[0].Addr(), "TLS handshake", "plain text")
	})
}

// TestTLSRedlockBadParams: every bad TLS or password parameter is a bad
// URL before anything is dialled (nothing listens on the ports).
func TestTLSRedlockBadParams(t *testing.T) {
	certs := testcerts.New(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	nodes := "redlock://" + tlsUser + ":" + tlsPass + "@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?"
	for _, c := range []struct{ query, want string }{
		{tlsQuery("ca_file", missing), "ca_file"},
		{tlsQuery("ca_file", certs.ClientKey), "ca_file"},
		{tlsQuery("cert_file", certs.ClientCert), "key_file"},
		{tlsQuery("key_file", certs.ClientKey), "cert_file"},
		{tlsQuery("cert_file", certs.ClientCert, "key_file", certs.ServerKey), "cert_file"},
		{tlsQuery("server_name", "bad name"), "server_name"},
		{tlsQuery("tls", "yes please"), "tls"},
		{tlsQuery("tls", "off", "ca_file", certs.CA), "ca_file needs TLS"},
		{tlsQuery("password_file", missing), "password_file"},
	} {
		u := nodes + c.query
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		cl, err := turnstile.Open(ctx, u)
		cancel()
		if err == nil {
			_ = cl.Close()
			t.Fatalf("Open(%s) succeeded", u)
		}
		if !errors.Is(err, turnstile.ErrInvalidURL) || strings.Contains(err.Error(), "connect") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL before any connection", u, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Open(%s) took %v", u, took)
		}
		wantIn(t, err, c.want)
		if strings.Contains(err.Error(), "QJZVWK") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}
