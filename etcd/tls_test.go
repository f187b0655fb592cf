package etcd_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
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

// openErr opens raw, which must fail, and returns the error, checked
// not to show a password of the tests (they all hold QJZVWK).
func openErr(t *testing.T, raw string) error {
	t.Helper()
	return tlstest.Secrets{"QJZVWK"}.OpenFails(t, 20*time.Second, raw)
}

// TestTLS runs a real etcd that serves clients over TLS only and wants
// a client certificate (--cert-file, --key-file, --trusted-ca-file,
// --client-cert-auth).
func TestTLS(t *testing.T) {
	certs := testcerts.New(t)
	srv := testserver.StartEtcdTLS(t, certs)

	t.Run("LockAndToken", func(t *testing.T) {
		for _, q := range []url.Values{nil, {"server_name": {"localhost"}}} {
			tlstest.LockAndFence(t, tlsURL(srv, "", q), nil, "tls-key")
		}
	})

	t.Run("WrongCA", func(t *testing.T) {
		err := openErr(t, tlsURL(srv, "", url.Values{"ca_file": {certs.OtherCA}, "dial_timeout": {"2s"}}))
		tlstest.WantIn(t, err, "x509: certificate signed by unknown authority")
		if errors.Is(err, turnstile.ErrInvalidURL) {
			t.Fatalf("a refused certificate is no invalid URL: %v", err)
		}
	})

	t.Run("WrongServerName", func(t *testing.T) {
		err := openErr(t, tlsURL(srv, "", url.Values{"server_name": {"etcd.example.com"}, "dial_timeout": {"2s"}}))
		tlstest.WantIn(t, err, "x509: certificate is valid for", "etcd.example.com")
	})

	t.Run("PlainToTLSPort", func(t *testing.T) {
		start := time.Now()
		err := openErr(t, "etcd://"+srv.Addr()+"?dial_timeout=2s")
		tlstest.WantIn(t, err, "expecting TLS")
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("plain-text Open of a TLS port took %v with dial_timeout=2s", d)
		}
	})

	t.Run("NoClientCertificate", func(t *testing.T) {
		err := openErr(t, tlsURL(srv, "", url.Values{"cert_file": {""}, "key_file": {""}, "dial_timeout": {"2s"}}))
		tlstest.WantIn(t, err, "client certificate")
	})

	t.Run("TLSToPlainPort", func(t *testing.T) {
		plain := testserver.StartEtcd(t)
		err := openErr(t, "etcd://"+plain.Addr()+"?dial_timeout=2s&"+etcdproc.TLSQuery(certs))
		tlstest.WantIn(t, err, "plain text on this port")
	})
}

// TestBadSecurityParams: every bad TLS or authentication parameter makes
// an invalid URL at once, before anything is dialled, and no error shows
// the password.
func TestBadSecurityParams(t *testing.T) {
	certs := testcerts.New(t)
	const secret = "QJZVWKsecretQJZVWK"
	pwFile := tlstest.PasswordFile(t, secret)
	// 127.0.0.1:1: nothing listens there; a URL that got as far as
	// dialling would fail with another error, or take dial_timeout.
	for _, raw := range []string{
		"etcd://127.0.0.1:1?ca_file=" + certs.Missing,
		"etcd://127.0.0.1:1?ca_file=" + certs.NotPEM,
		"etcd://127.0.0.1:1?ca_file=",
		"etcd://127.0.0.1:1?cert_file=" + certs.ClientCert,
		"etcd://127.0.0.1:1?key_file=" + certs.ClientKey,
		"etcd://127.0.0.1:1?cert_file=" + certs.ClientCert + "&key_file=" + certs.ServerCert,
		"etcd://127.0.0.1:1?cert_file=" + certs.NotPEM + "&key_file=" + certs.ClientKey,
		"etcd://127.0.0.1:1?server_name=a%20b",
		"etcd://127.0.0.1:1?server_name=h:1",
		"etcd://127.0.0.1:1?tls=off&ca_file=" + certs.CA,
		"etcd://127.0.0.1:1?tls=maybe",
		"etcd://127.0.0.1:1?tls=on&tls=off",
		"etcd://user:" + secret + "@127.0.0.1:1?ca_file=" + certs.NotPEM,
		"etcd://user:" + secret + "@127.0.0.1:1?password_file=" + pwFile,
		"etcd://:" + secret + "@127.0.0.1:1",
		"etcd://user@127.0.0.1:1",
		"etcd://user@127.0.0.1:1?password_file=" + certs.Missing,
		"etcd://user@127.0.0.1:1?password_file=" + pwFile + "&tls=off&server_name=localhost",
	} {
		tlstest.Secrets{secret, "QJZVWK"}.InvalidURL(t, raw)
	}
}
