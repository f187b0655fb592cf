package redlock

import (
	"crypto/tls"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: func(u *url.URL) error { _, _, _, err := parseURL(u); return err },
	Host: "127.0.0.1:1,127.0.0.1:2",
}

// hostChecks: hosts named by IPv6 literals, alone and in lists (not as
// [[::1]]:6379), are dialled at their addresses; malformed ones make an
// invalid URL.
var hostChecks = storeurltest.Hosts{Schemes: urlForm.Schemes, User: true, Port: "6379", List: true, Addrs: urlAddrs}

func TestURLHosts(t *testing.T) { hostChecks.Check(t) }

func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }

// urlAddrs are the addresses that parseURL reads from u.
func urlAddrs(u *url.URL) ([]string, error) {
	addrs, _, _, err := parseURL(u)
	return addrs, err
}

// TestURLTLS: what tls= and the TLS parameters turn on, for every node
// alike: the servers always verified, against ca_file or the system's
// roots, under server_name or each node's own host; the client
// certificate presented when cert_file and key_file name one; tls=off
// with a TLS parameter refused, naming it.
func TestURLTLS(t *testing.T) {
	ca, cert, key := urlcheck.QueryFiles(testcerts.New(t))
	urlcheck.CheckTLS(t, urlTLS, []urlcheck.TLSCase{
		{Raw: "redlock://h1,h2,h3"},
		{Raw: "redlock://h1,h2,h3?tls=off"},
		{Raw: "redlock://h1,h2,h3?tls=on", TLS: true},
		{Raw: "redlock://h1,h2,h3?tls=1", TLS: true},
		{Raw: "redlock://h1?ca_file=" + ca, TLS: true, OwnCA: true},
		{Raw: "redlock://h1,h2?tls=on&server_name=redis.example", TLS: true, ServerName: "redis.example"},
		{Raw: "redlock://u:p@h1,h2,h3/1?ca_file=" + ca + "&cert_file=" + cert + "&key_file=" + key + "&tls=on", TLS: true, OwnCA: true, ClientCert: true},
	})
	for raw, want := range map[string]string{
		"redlock://h1?tls=off&ca_file=" + ca:                  "ca_file needs TLS",
		"redlock://h1?tls=0&server_name=x&cert_file=" + cert:  "cert_file, server_name need TLS",
		"redlock://h1?tls=maybe":                              `tls="maybe" is not on or off`,
		"redlock://h1?tls=on&tls=on":                          "tls",
		"redlock://h1?cert_file=" + cert:                      "key_file",
		"redlock://h1?ca_file=%2Fnonexistent":                 "ca_file",
		"redlock://h1?ca_file=" + key:                         "ca_file",
		"redlock://h1?server_name=a%2Fb":                      "server_name",
		"redlock://u:QJZVWKQJZVWK@h1?tls=off&key_file=" + key: "key_file needs TLS",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = parseURL(u)
		if !errors.Is(err, turnstile.ErrInvalidURL) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "QJZVWK") {
			t.Errorf("parseURL(%s) = %v; want ErrInvalidURL saying %q", raw, err, want)
		}
	}
}

// urlTLS is the TLS configuration that parseURL reads from u for every
// node, and whether the clients dial through a hook of their own.
func urlTLS(u *url.URL) (*tls.Config, bool, error) {
	_, opt, _, err := parseURL(u)
	return opt.TLSConfig, opt.DialCtxFn != nil, err
}

// TestURLPasswordFile: password_file gives the password of every node.
func TestURLPasswordFile(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse("redlock://locker@h1,h2,h3?tls=on&password_file=" + url.QueryEscape(pw))
	if err != nil {
		t.Fatal(err)
	}
	_, opt, _, err := parseURL(u)
	if err != nil || opt.Username != "locker" || opt.Password != "s3cret pass" {
		t.Errorf("parseURL(%s): user %q, password %q, %v", u, opt.Username, opt.Password, err)
	}
}

// FuzzPasswordFileRedacts: a password read from password_file reaches
// every node's client, and no error of the parser shows it, whatever
// else the URL gets wrong.
func FuzzPasswordFileRedacts(f *testing.F) { redactChecks.FuzzPasswordFile(f, passwordFile) }

// TestPasswordFileOpenRedacts: nor does any error of Open.
func TestPasswordFileOpenRedacts(t *testing.T) { redactChecks.CheckPasswordFileOpen(t, passwordFile) }

var passwordFile = redacttest.PasswordFile{
	URL: "redlock://locker@127.0.0.1:1,127.0.0.1:2/0",
	Extras: []string{"tls=on", "ca_file=/nonexistent", "tls=off&ca_file=x", "cert_file=x", "server_name=a%20b", "x=1",
		"prefix=%7B", "password_file=/etc/hostname", "node_timeout=1ns"},
	Password: func(u *url.URL) (string, error) {
		_, opt, _, err := parseURL(u)
		return opt.Password, err
	},
}

// TestAmbiguousUserinfo: a URL whose password holds an '@' and then a
// '/', '?' or '#' unencoded, whose user information therefore has no
// clear end, is refused before any use — no host looked up — with an
// error that names no part of it.
func TestAmbiguousUserinfo(t *testing.T) { redactChecks.CheckAmbiguous(t) }

// TestUnknownParamRedacted: an unknown query parameter, a misspelt
// password= among them, is refused by its name, and its value shows
// nowhere in the error.
func TestUnknownParamRedacted(t *testing.T) { redactChecks.CheckUnknownParams(t) }
