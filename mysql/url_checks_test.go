package mysql

import (
	"net/url"
	"testing"

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
