package mysql

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: redacttest.ParseErr(parseURL)}

// hostChecks: a server named by an IPv6 literal is dialled at its address;
// a malformed one, or several hosts, make an invalid URL.
var hostChecks = storeurltest.Hosts{Schemes: urlForm.Schemes, User: true, Path: "/db", Port: "3306", Addrs: urlAddrs}

func TestURLHosts(t *testing.T) { hostChecks.Check(t) }

func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }

// urlAddrs are the addresses that parseURL reads from u.
func urlAddrs(u *url.URL) ([]string, error) {
	cfg, _, err := parseURL(u)
	return []string{cfg.Addr}, err
}

// FuzzPasswordFileRedacts: the password that password_file names reaches
// the driver as it is in the file (one trailing newline dropped), and no
// error of the parser shows it, whatever else the URL says; TLS
// parameters among them.
func FuzzPasswordFileRedacts(f *testing.F) {
	c := testcerts.New(f)
	for i, q := range []string{
		"", "tls=false", "ca_file=" + url.QueryEscape(c.CA), "ca_file=" + url.QueryEscape(c.OtherCA) + "&server_name=bad%20name",
		"ca_file=/nonexistent", "cert_file=" + url.QueryEscape(c.ClientCert), "conns=0", "password_file=/x", "tls=bogus",
		"ca_file=" + url.QueryEscape(c.CA) + "&tls=skip-verify",
	} {
		f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(i), q)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, sepIdx uint8, query string) {
		secret, never := redacttest.Secret(a, b, redacttest.Separators[int(sepIdx)%len(redacttest.Separators)])
		pw := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pw, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		raw := "mysql://u@127.0.0.1:1/db?password_file=" + url.QueryEscape(pw) + "&" + query
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		cfg, _, err := parseURL(u)
		if err != nil {
			if leak := redacttest.ErrorLeak(err, never); leak != "" {
				t.Fatalf("parseURL(%q): error %q shows the password %q", raw, err, leak)
			}
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v, want ErrInvalidURL", raw, err)
			}
			return
		}
		if cfg.Passwd != secret {
			t.Fatalf("parseURL(%q): the driver gets password %q, want the file's %q", raw, cfg.Passwd, secret)
		}
	})
}

// TestPasswordFileOpenRedacts: the driver's errors, with nothing
// listening, do not show a password from password_file either.
func TestPasswordFileOpenRedacts(t *testing.T) {
	c := testcerts.New(t)
	secret, never := redacttest.Secret([]byte("s3cr3tPW"), []byte("batterystaple"), "")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"tls=false", "ca_file=" + url.QueryEscape(c.CA)} {
		raw := "mysql://u@127.0.0.1:1/db?password_file=" + url.QueryEscape(pw) + "&" + q
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cl, err := turnstile.Open(ctx, raw)
		cancel()
		if err == nil {
			_ = cl.Close()
			t.Fatalf("Open(%q) succeeded with nothing listening", raw)
		}
		if leak := redacttest.ErrorLeak(err, never); leak != "" {
			t.Fatalf("Open(%q): error %q shows the password %q", raw, err, leak)
		}
	}
}
