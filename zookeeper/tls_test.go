package zookeeper_test

import (
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
	openErr := func(t *testing.T, raw string, wait time.Duration) error {
		t.Helper()
		ctx := ctxFor(t, wait)
		c, err := turnstile.Open(ctx, raw)
		if err == nil {
			_ = c.Close()
		}
		t.Logf("error: %v", err)
		return err
	}

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
		err := openErr(t, tlsURL("", url.Values{"ca_file": {certs.OtherCA}}), time.Minute)
		if err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
			t.Fatalf("Open with a CA that did not sign the server's certificate = %v, want the certificate problem named", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("a certificate that does not verify took %v to refuse: Dial should give up", d)
		}
	})

	t.Run("WrongServerName", func(t *testing.T) {
		err := openErr(t, tlsURL("", url.Values{"server_name": {"zk.example.com"}}), time.Minute)
		if err == nil || !strings.Contains(err.Error(), "x509: certificate is valid for") {
			t.Fatalf("Open with a server_name the certificate lacks = %v, want the certificate problem named", err)
		}
	})

	t.Run("NoClientCertificate", func(t *testing.T) {
		err := openErr(t, tlsURL("", url.Values{"cert_file": {""}, "key_file": {""}}), time.Minute)
		if err == nil || !strings.Contains(err.Error(), "client certificate") {
			t.Fatalf("Open without the client certificate the server wants = %v, want a hint at cert_file", err)
		}
	})

	t.Run("PlainToTLSPort", func(t *testing.T) {
		err := openErr(t, "zookeeper://"+srv.TLSAddr()+"/tls", 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "expecting TLS") {
			t.Fatalf("plain Open of the TLS port = %v, want a hint at TLS", err)
		}
	})

	t.Run("TLSToPlainPort", func(t *testing.T) {
		err := openErr(t, "zookeeper://"+srv.Addr()+"/tls?"+clientQuery.Encode(), 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "secureClientPort") {
			t.Fatalf("TLS Open of the plain port = %v, want a hint at the TLS port", err)
		}
	})
}

// TestBadSecurityParams: every bad TLS or credentials parameter makes an
// invalid URL at once, before anything is dialled, and no error shows the
// password.
func TestBadSecurityParams(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "QJZVWKsecretQJZVWK"
	for _, raw := range []string{
		"zookeeper://127.0.0.1:1?ca_file=" + filepath.Join(dir, "missing.pem"),
		"zookeeper://127.0.0.1:1?ca_file=" + notPEM,
		"zookeeper://127.0.0.1:1?cert_file=" + certs.ClientCert,
		"zookeeper://127.0.0.1:1?key_file=" + certs.ClientKey,
		"zookeeper://127.0.0.1:1?cert_file=" + certs.ClientCert + "&key_file=" + certs.ServerCert,
		"zookeeper://127.0.0.1:1?server_name=a%20b",
		"zookeeper://127.0.0.1:1?tls=off&ca_file=" + certs.CA,
		"zookeeper://127.0.0.1:1?tls=maybe",
		"zookeeper://user:" + secret + "@127.0.0.1:1?ca_file=" + notPEM,
		"zookeeper://user:" + secret + "@127.0.0.1:1?password_file=" + notPEM,
		"zookeeper://:" + secret + "@127.0.0.1:1",
		"zookeeper://a%3Ab:" + secret + "@127.0.0.1:1",
		"zookeeper://user@127.0.0.1:1",
		"zookeeper://user@127.0.0.1:1?password_file=" + filepath.Join(dir, "missing"),
	} {
		start := time.Now()
		ctx := ctxFor(t, 20*time.Second)
		c, err := turnstile.Open(ctx, raw)
		if err == nil {
			_ = c.Close()
		}
		if !errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "QJZVWK") {
			t.Errorf("Open(%q): error %q shows the password", raw, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Open(%q) took %v: it must fail before dialling", raw, d)
		}
	}
}
