package zookeeper_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
)

// TestTLS runs a real ZooKeeper with a TLS-only client port (Netty,
// secureClientPort, ssl.clientAuth=need) and its plain port beside it.
func TestTLS(t *testing.T) {
	certs := testcerts.New(t)
	srv := testserver.StartZooKeeperTLS(t, certs)
	clientQuery := url.Values{"ca_file": {certs.CA}, "cert_file": {certs.ClientCert}, "key_file": {certs.ClientKey}}
	tlsURL := func(userinfo string, q url.Values) string {
		// The first TLS sessions of a cold server on a loaded machine
		// can take longer than the default dial timeout.
		v := url.Values{"dial_timeout": {"1m"}}
		for k, x := range clientQuery {
			v[k] = x
		}
		for k, x := range q {
			if x[0] == "" {
				delete(v, k)
			} else {
				v[k] = x
			}
		}
		if userinfo != "" {
			userinfo += "@"
		}
		return "zookeeper://" + userinfo + srv.TLSAddr() + "/tls?" + v.Encode()
	}
	secrets := tlstest.Secrets{"QJZVWK"}

	t.Run("LockAndToken", func(t *testing.T) {
		for _, q := range []url.Values{nil, {"server_name": {"localhost"}}} {
			ctx := ctxFor(t, 30*time.Second)
			a, err := turnstile.Open(ctx, tlsURL("alice:QJZVWKtlsQJZVWK", q), turnstile.WithTTL(3*time.Second))
			if err != nil {
				t.Fatalf("Open over TLS: %v", err)
			}
			l, err := a.TryAcquire(ctx, "tls-key")
			if err != nil {
				t.Fatalf("TryAcquire over TLS: %v", err)
			}
			b, err := turnstile.Open(ctx, tlsURL("alice:QJZVWKtlsQJZVWK", q), turnstile.WithTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.TryAcquire(ctx, "tls-key"); !errors.Is(err, turnstile.ErrNotAcquired) {
				t.Fatalf("second TryAcquire of a held lock = %v, want ErrNotAcquired", err)
			}
			first := l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l2, err := b.Acquire(ctx, "tls-key")
			if err != nil {
				t.Fatalf("Acquire after release: %v", err)
			}
			if first == 0 || l2.Token() <= first {
				t.Fatalf("tokens %d then %d: want increasing", first, l2.Token())
			}
			_ = l2.Release(ctx)
			_ = b.Close()
			_ = a.Close()
		}
	})

	t.Run("WrongCA", func(t *testing.T) {
		start := time.Now()
		err := secrets.OpenFails(t, time.Minute, tlsURL("", url.Values{"ca_file": {certs.OtherCA}}))
		tlstest.WantIn(t, err, "x509: certificate signed by unknown authority")
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("a certificate that does not verify took %v to refuse: Dial should give up", d)
		}
	})

	t.Run("WrongServerName", func(t *testing.T) {
		err := secrets.OpenFails(t, time.Minute, tlsURL("", url.Values{"server_name": {"zk.example.com"}}))
		tlstest.WantIn(t, err, "x509: certificate is valid for")
	})

	t.Run("NoClientCertificate", func(t *testing.T) {
		err := secrets.OpenFails(t, time.Minute, tlsURL("", url.Values{"cert_file": {""}, "key_file": {""}}))
		tlstest.WantIn(t, err, "client certificate")
	})

	t.Run("PlainToTLSPort", func(t *testing.T) {
		err := secrets.OpenFails(t, 5*time.Second, "zookeeper://"+srv.TLSAddr()+"/tls")
		tlstest.WantIn(t, err, "expecting TLS")
	})

	t.Run("TLSToPlainPort", func(t *testing.T) {
		err := secrets.OpenFails(t, 5*time.Second, "zookeeper://"+srv.Addr()+"/tls?"+clientQuery.Encode())
		tlstest.WantIn(t, err, "secureClientPort")
	})
}

// TestBadSecurityParams: every bad TLS or credentials parameter makes an
// invalid URL at once, before anything is dialled, and no error shows the
// password.
func TestBadSecurityParams(t *testing.T) {
	certs := testcerts.New(t)
	const secret = "QJZVWKsecretQJZVWK"
	for _, raw := range []string{
		"zookeeper://127.0.0.1:1?ca_file=" + certs.Missing,
		"zookeeper://127.0.0.1:1?ca_file=" + certs.NotPEM,
		"zookeeper://127.0.0.1:1?cert_file=" + certs.ClientCert,
		"zookeeper://127.0.0.1:1?key_file=" + certs.ClientKey,
		"zookeeper://127.0.0.1:1?cert_file=" + certs.ClientCert + "&key_file=" + certs.ServerCert,
		"zookeeper://127.0.0.1:1?server_name=a%20b",
		"zookeeper://127.0.0.1:1?tls=off&ca_file=" + certs.CA,
		"zookeeper://127.0.0.1:1?tls=maybe",
		"zookeeper://user:" + secret + "@127.0.0.1:1?ca_file=" + certs.NotPEM,
		"zookeeper://user:" + secret + "@127.0.0.1:1?password_file=" + certs.NotPEM,
		"zookeeper://:" + secret + "@127.0.0.1:1",
		"zookeeper://a%3Ab:" + secret + "@127.0.0.1:1",
		"zookeeper://user@127.0.0.1:1",
		"zookeeper://user@127.0.0.1:1?password_file=" + certs.Missing,
	} {
		tlstest.Secrets{"QJZVWK"}.InvalidURL(t, raw)
	}
}
