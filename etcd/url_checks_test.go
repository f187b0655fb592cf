package etcd

import (
	"net/url"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: redacttest.ParseErr(parseURL), Path: "/"}

// hostChecks: hosts named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
var hostChecks = storeurltest.Hosts{Schemes: urlForm.Schemes, User: true, Port: "2379", List: true, Addrs: urlAddrs}

func TestURLHosts(t *testing.T) { hostChecks.Check(t) }

func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }

// urlAddrs are the addresses that parseURL reads from u.
func urlAddrs(u *url.URL) ([]string, error) {
	var addrs []string
	cfg, _, err := parseURL(u)
	for _, ep := range cfg.Endpoints {
		ep = strings.TrimPrefix(ep, "http://")
		addrs = append(addrs, strings.TrimPrefix(ep, "https://"))
	}
	return addrs, err
}

// TestTLSParams: the TLS parameters and tls=on make https:// endpoints
// with a TLS configuration that names what they say; without them, or
// with tls=off, http:// and none.
func TestTLSParams(t *testing.T) {
	certs := testcerts.New(t)
	for raw, want := range map[string]string{
		"etcd://h":                                   "http://",
		"etcd://h?tls=off":                           "http://",
		"etcd://h?tls=on":                            "https://",
		"etcd://h?tls=TRUE":                          "https://",
		"etcd://h?ca_file=" + certs.CA:               "https://",
		"etcd://h?server_name=localhost":             "https://",
		"etcd://h?ca_file=" + certs.CA + "&tls=true": "https://",
		"etcd://h?" + etcdproc.TLSQuery(certs):       "https://",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := parseURL(u)
		if err != nil {
			t.Fatalf("parseURL(%q): %v", raw, err)
		}
		if !strings.HasPrefix(cfg.Endpoints[0], want) || (want == "https://") != (cfg.TLS != nil) {
			t.Fatalf("parseURL(%q): endpoint %q, TLS %v; want %s", raw, cfg.Endpoints[0], cfg.TLS != nil, want)
		}
		q := u.Query()
		switch {
		case cfg.TLS == nil:
		case q.Has("ca_file") != (cfg.TLS.RootCAs != nil):
			t.Fatalf("parseURL(%q): ca_file and the roots disagree", raw)
		case q.Has("cert_file") != (len(cfg.TLS.Certificates) == 1):
			t.Fatalf("parseURL(%q): cert_file and the client certificate disagree", raw)
		case cfg.TLS.ServerName != q.Get("server_name"):
			t.Fatalf("parseURL(%q): server name %q", raw, cfg.TLS.ServerName)
		case cfg.TLS.InsecureSkipVerify:
			t.Fatalf("parseURL(%q) skips verification", raw)
		}
	}
}

// FuzzPasswordFileRedacts: a password read from password_file reaches
// etcd's client, and no error of the parser shows it, whatever else the
// URL gets wrong.
func FuzzPasswordFileRedacts(f *testing.F) { redactChecks.FuzzPasswordFile(f, passwordFile) }

// TestPasswordFileOpenRedacts: nor does any error of Open.
func TestPasswordFileOpenRedacts(t *testing.T) { redactChecks.CheckPasswordFileOpen(t, passwordFile) }

var passwordFile = redacttest.PasswordFile{
	Extras:   []string{"ca_file=/nonexistent", "tls=off&server_name=localhost", "cert_file=x", "tls=maybe", "prefix=", "x=1", "dial_timeout=0s", "tls=on"},
	Password: redacttest.PasswordOf(parseURL, func(cfg clientv3.Config) string { return cfg.Password }),
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
