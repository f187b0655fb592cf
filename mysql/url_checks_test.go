package mysql

import (
	"net/url"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: redacttest.ParseErr(parseURL), User: "u"}

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

// FuzzPasswordFileRedacts: a password read from password_file reaches
// the driver, and no error of the parser shows it, whatever else the
// URL gets wrong.
func FuzzPasswordFileRedacts(f *testing.F) { redactChecks.FuzzPasswordFile(f, passwordFile) }

// TestPasswordFileOpenRedacts: nor does any error of Open, the driver's
// included.
func TestPasswordFileOpenRedacts(t *testing.T) { redactChecks.CheckPasswordFileOpen(t, passwordFile) }

var passwordFile = redacttest.PasswordFile{
	URL: "mysql://u@127.0.0.1:1/db",
	Extras: []string{"tls=false", "ca_file=/nonexistent", "cert_file=x", "server_name=bad%20name", "conns=0",
		"password_file=/x", "tls=bogus", "ca_file=x&tls=skip-verify"},
	Password: redacttest.PasswordOf(parseURL, func(cfg *gomysql.Config) string { return cfg.Passwd }),
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
