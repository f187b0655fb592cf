package etcd_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// tlsURL is the etcd:// URL of srv with the query q added to the
// certificates' parameters that q does not set.
func tlsURL(srv *testserver.Etcd, userinfo string, q url.Values) string {
	base, _ := url.ParseQuery(etcdproc.TLSQuery(srv.Certs()))
	for k, v := range q {
		if v[0] == "" {
			delete(base, k)
			continue
		}
		base[k] = v
	}
	if userinfo != "" {
		userinfo += "@"
	}
	return "etcd://" + userinfo + srv.Addr() + "?" + base.Encode()
}

// openErr opens raw and returns its error, closing a client that opened.
func openErr(t *testing.T, raw string) error {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	c, err := turnstile.Open(ctx, raw)
	if err == nil {
		_ = c.Close()
	}
	return err
}

// TestTLS runs a real etcd that serves clients over TLS only and wants
// a client certificate (--cert-file, --key-file, --trusted-ca-file,
// --client-cert-auth).
func TestTLS(t *testing.T) {
	certs := testcerts.New(t)
	srv := testserver.StartEtcdTLS(t, certs)

	t.Run("LockAndToken", func(t *testing.T) {
		for _, q := range []url.Values{nil, {"server_name": {"localhost"}}} {
			ctx := ctxFor(t, 30*time.Second)
			c, err := turnstile.Open(ctx, tlsURL(srv, "", q))
			if err != nil {
				t.Fatalf("Open over TLS (%v): %v", q, err)
			}
			l, err := c.TryAcquire(ctx, "tls-key")
			if err != nil {
				t.Fatalf("TryAcquire over TLS: %v", err)
			}
			other, err := turnstile.Open(ctx, tlsURL(srv, "", q))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.TryAcquire(ctx, "tls-key"); !errors.Is(err, turnstile.ErrNotAcquired) {
				t.Fatalf("second TryAcquire of a held lock over TLS = %v, want ErrNotAcquired", err)
			}
			first := l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release over TLS: %v", err)
			}
			l2, err := other.TryAcquire(ctx, "tls-key")
			if err != nil {
				t.Fatalf("TryAcquire after release: %v", err)
			}
			if first == 0 || l2.Token() <= first {
				t.Fatalf("tokens %d then %d: want increasing, above 0", first, l2.Token())
			}
			_ = l2.Release(ctx)
			_ = other.Close()
			_ = c.Close()
		}
	})

	t.Run("WrongCA", func(t *testing.T) {
		err := openErr(t, tlsURL(srv, "", url.Values{"ca_file": {certs.OtherCA}, "dial_timeout": {"2s"}}))
		if err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
			t.Fatalf("Open with a CA that did not sign the server's certificate = %v, want the certificate problem named", err)
		}
		t.Logf("error: %v", err)
		if errors.Is(err, turnstile.ErrInvalidURL) {
			t.Fatalf("a refused certificate is no invalid URL: %v", err)
		}
	})

	t.Run("WrongServerName", func(t *testing.T) {
		err := openErr(t, tlsURL(srv, "", url.Values{"server_name": {"etcd.example.com"}, "dial_timeout": {"2s"}}))
		if err == nil || !strings.Contains(err.Error(), "x509: certificate is valid for") || !strings.Contains(err.Error(), "etcd.example.com") {
			t.Fatalf("Open with a server_name the certificate lacks = %v, want the certificate problem named", err)
		}
		t.Logf("error: %v", err)
	})

	t.Run("PlainToTLSPort", func(t *testing.T) {
		start := time.Now()
		err := openErr(t, "etcd://"+srv.Addr()+"?dial_timeout=2s")
		if err == nil || !strings.Contains(err.Error(), "expecting TLS") {
			t.Fatalf("plain-text Open of a TLS port = %v, want a hint at TLS", err)
		}
		t.Logf("error: %v", err)
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("plain-text Open of a TLS port took %v with dial_timeout=2s", d)
		}
	})

	t.Run("NoClientCertificate", func(t *testing.T) {
		err := openErr(t, tlsURL(srv, "", url.Values{"cert_file": {""}, "key_file": {""}, "dial_timeout": {"2s"}}))
		if err == nil || !strings.Contains(err.Error(), "client certificate") {
			t.Fatalf("Open without the client certificate etcd wants = %v, want a hint at cert_file", err)
		}
		t.Logf("error: %v", err)
	})

	t.Run("TLSToPlainPort", func(t *testing.T) {
		plain := testserver.StartEtcd(t)
		err := openErr(t, "etcd://"+plain.Addr()+"?dial_timeout=2s&"+etcdproc.TLSQuery(certs))
		if err == nil || !strings.Contains(err.Error(), "plain text on this port") {
			t.Fatalf("TLS Open of a plain-text port = %v, want the TLS problem named", err)
		}
		t.Logf("error: %v", err)
	})
}

// TestBadSecurityParams: every bad TLS or authentication parameter makes
// an invalid URL at once, before anything is dialled, and no error shows
// the password.
func TestBadSecurityParams(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "QJZVWKsecretQJZVWK"
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// 127.0.0.1:1: nothing listens there; a URL that got as far as
	// dialling would fail with another error, or take dial_timeout.
	for _, raw := range []string{
		"etcd://127.0.0.1:1?ca_file=" + filepath.Join(dir, "missing.pem"),
		"etcd://127.0.0.1:1?ca_file=" + notPEM,
		"etcd://127.0.0.1:1?ca_file=",
		"etcd://127.0.0.1:1?cert_file=" + certs.ClientCert,
		"etcd://127.0.0.1:1?key_file=" + certs.ClientKey,
		"etcd://127.0.0.1:1?cert_file=" + certs.ClientCert + "&key_file=" + certs.ServerCert,
		"etcd://127.0.0.1:1?cert_file=" + notPEM + "&key_file=" + certs.ClientKey,
		"etcd://127.0.0.1:1?server_name=a%20b",
		"etcd://127.0.0.1:1?server_name=h:1",
		"etcd://127.0.0.1:1?tls=off&ca_file=" + certs.CA,
		"etcd://127.0.0.1:1?tls=maybe",
		"etcd://127.0.0.1:1?tls=on&tls=off",
		"etcd://user:" + secret + "@127.0.0.1:1?ca_file=" + notPEM,
		"etcd://user:" + secret + "@127.0.0.1:1?password_file=" + pwFile,
		"etcd://:" + secret + "@127.0.0.1:1",
		"etcd://user@127.0.0.1:1",
		"etcd://user@127.0.0.1:1?password_file=" + filepath.Join(dir, "missing"),
		"etcd://user@127.0.0.1:1?password_file=" + pwFile + "&tls=off&server_name=localhost",
	} {
		start := time.Now()
		err := openErr(t, raw)
		if !errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", raw, err)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "QJZVWK") {
			t.Errorf("Open(%q): error %q shows the password", raw, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Open(%q) took %v: it must fail before dialling", raw, d)
		}
	}
}
