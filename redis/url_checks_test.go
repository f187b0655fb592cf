package redis

import (
	"crypto/tls"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/testcerts"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
	"github.com/turnstilelock/turnstile/internal/urlcheck"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: redacttest.ParseErr(parseURL)}

// hostChecks: hosts named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
var hostChecks = storeurltest.Hosts{Schemes: []string{"redis", "rediss"}, User: true, Port: "6379", List: true, Addrs: urlAddrs}

// sentinelHostChecks: the same of the Sentinels of a redis+sentinel://
// URL, whose port defaults to 26379.
var sentinelHostChecks = storeurltest.Hosts{Schemes: []string{"redis+sentinel", "rediss+sentinel"}, User: true, Path: "/mymaster", Port: DefaultSentinelPort, List: true, Addrs: urlAddrs}

func TestURLHosts(t *testing.T) {
	hostChecks.Check(t)
	sentinelHostChecks.Check(t)
}

func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }

// urlAddrs are the addresses that parseURL reads from u.
func urlAddrs(u *url.URL) ([]string, error) {
	opt, _, err := parseURL(u)
	return opt.InitAddress, err
}

// TestURLTLS: what the TLS parameters and the schemes turn on, and the
// configuration they make: the server always verified, against ca_file
// or the system's roots, under server_name or the host; the client
// certificate presented when cert_file and key_file name one.
func TestURLTLS(t *testing.T) {
	ca, cert, key := urlcheck.QueryFiles(testcerts.New(t))
	urlcheck.CheckTLS(t, urlTLS, []urlcheck.TLSCase{
		{Raw: "redis://h:1"},
		{Raw: "redis://h1:1,h2:2/0?prefix=x"},
		{Raw: "rediss://h:1", TLS: true, ServerName: "h"},
		{Raw: "REDISS://h:1", TLS: true, ServerName: "h"},
		{Raw: "rediss://h1:1,h2:2", TLS: true},
		{Raw: "redis://h:1?ca_file=" + ca, TLS: true, ServerName: "h", OwnCA: true},
		{Raw: "redis://h:1?server_name=other.example", TLS: true, ServerName: "other.example"},
		{Raw: "rediss://h1:1,h2:2?server_name=10.1.2.3", TLS: true, ServerName: "10.1.2.3"},
		{Raw: "rediss://[::1]:1?ca_file=" + ca, TLS: true, ServerName: "::1", OwnCA: true},
		{Raw: "redis://h1:1,h2:2?cert_file=" + cert + "&key_file=" + key, TLS: true, ClientCert: true},
		{Raw: "rediss://u:p@h:1/2?ca_file=" + ca + "&cert_file=" + cert + "&key_file=" + key + "&server_name=localhost", TLS: true, ServerName: "localhost", OwnCA: true, ClientCert: true},
	})
}

// urlTLS is the TLS configuration that parseURL reads from u, and whether
// the client dials through a hook of its own.
func urlTLS(u *url.URL) (*tls.Config, bool, error) {
	opt, _, err := parseURL(u)
	return opt.TLSConfig, opt.DialCtxFn != nil, err
}

// TestURLPasswordFile: password_file gives the password, with the user
// of the URL, and is no parameter of the backend's.
func TestURLPasswordFile(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		"rediss://locker@h:1?password_file=" + url.QueryEscape(pw),
		"redis://locker@h1:1,h2:2?prefix=p:&password_file=" + url.QueryEscape(pw),
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		opt, opts, err := parseURL(u)
		if err != nil {
			t.Fatalf("parseURL(%s): %v", raw, err)
		}
		if opt.Username != "locker" || opt.Password != "s3cret pass" {
			t.Errorf("parseURL(%s): user %q, password %q", raw, opt.Username, opt.Password)
		}
		if strings.Contains(raw, "prefix") && len(opts) != 1 {
			t.Errorf("parseURL(%s): %d options, want the prefix", raw, len(opts))
		}
	}
}

// FuzzPasswordFileRedacts: a password read from password_file reaches
// the client, and no error of the parser shows it, whatever else the URL
// gets wrong.
func FuzzPasswordFileRedacts(f *testing.F) { redactChecks.FuzzPasswordFile(f, passwordFile) }

// TestPasswordFileOpenRedacts: nor does any error of Open.
func TestPasswordFileOpenRedacts(t *testing.T) { redactChecks.CheckPasswordFileOpen(t, passwordFile) }

var passwordFile = redacttest.PasswordFile{
	URL: "rediss://locker@127.0.0.1:1/0",
	Extras: []string{"ca_file=/nonexistent", "cert_file=x", "server_name=a%20b", "x=1", "prefix=%7B",
		"password_file=/etc/hostname", "dial_timeout=1s&protocol=4", "protocol=2"},
	Password: redacttest.PasswordOf(parseURL, func(opt rueidis.ClientOption) string { return opt.Password }),
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
