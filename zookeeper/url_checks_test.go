package zookeeper

import (
	"net/url"
	"testing"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: redacttest.ParseErr(parseURL)}

// hostChecks: hosts named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
var hostChecks = storeurltest.Hosts{Schemes: urlForm.Schemes, Port: "2181", List: true, Addrs: urlAddrs}

func TestURLHosts(t *testing.T) { hostChecks.Check(t) }

func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }

// urlAddrs are the addresses that parseURL reads from u.
func urlAddrs(u *url.URL) ([]string, error) {
	servers, _, err := parseURL(u)
	return servers, err
}

// FuzzPasswordFileRedacts: a password read from password_file becomes
// the digest password, and no error of the parser shows it, whatever
// else the URL gets wrong.
func FuzzPasswordFileRedacts(f *testing.F) { redactChecks.FuzzPasswordFile(f, passwordFile) }

// TestPasswordFileOpenRedacts: nor does any error of Open.
func TestPasswordFileOpenRedacts(t *testing.T) { redactChecks.CheckPasswordFileOpen(t, passwordFile) }

var passwordFile = redacttest.PasswordFile{
	URL:    "zookeeper://alice@127.0.0.1:1/app",
	Extras: []string{"session_timeout=0s", "x=1", "session_timeout=1s&session_timeout=2s", "password_file=/x", "ca_file=/nonexistent", "tls=on"},
	Password: func(u *url.URL) (string, error) {
		_, opts, err := parseURL(u)
		if err != nil {
			return "", err
		}
		cfg, err := applyOptions(opts)
		return cfg.password, err
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
