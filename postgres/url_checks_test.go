package postgres

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
	"github.com/turnstilelock/turnstile/internal/storeurl/storeurltest"
)

// redactChecks: no error of the parser (FuzzParseURLRedacts) or of Open,
// the driver's included (TestOpenRedacts), shows a secret of the URL.
var redactChecks = redacttest.Backend{Schemes: urlForm.Schemes, Parse: redacttest.ParseErr(parseURL), LooseParams: true}

// hostChecks: hosts named by IPv6 literals, alone and in lists, are
// dialled at their addresses; malformed ones make an invalid URL.
var hostChecks = storeurltest.Hosts{Schemes: urlForm.Schemes, User: true, Path: "/db", Port: "5432", List: true, Addrs: urlAddrs}

func TestURLHosts(t *testing.T) { hostChecks.Check(t) }

func FuzzParseURLRedacts(f *testing.F) { redactChecks.Fuzz(f) }

func TestOpenRedacts(t *testing.T) { redactChecks.CheckOpen(t) }

// urlAddrs are the addresses that parseURL reads from u.
func urlAddrs(u *url.URL) ([]string, error) {
	cfg, _, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	// pgx tries the first host, then its fallbacks (each host once per
	// TLS mode to try).
	addrs := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, f := range cfg.Fallbacks {
		if a := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

// FuzzPasswordFileRedacts: a password read from password_file reaches
// pgx, and no error of the parser shows it, whatever else the URL gets
// wrong.
func FuzzPasswordFileRedacts(f *testing.F) { redactChecks.FuzzPasswordFile(f, passwordFile) }

// TestPasswordFileOpenRedacts: nor does any error of Open, the driver's
// included.
func TestPasswordFileOpenRedacts(t *testing.T) { redactChecks.CheckPasswordFileOpen(t, passwordFile) }

var passwordFile = redacttest.PasswordFile{
	URL: "postgres://u@127.0.0.1:1/db",
	Extras: []string{"sslmode=disable", "ca_file=/nonexistent", "cert_file=x", "server_name=bad%20name", "lock_conns=0",
		"password_file=/x", "sslmode=bogus", "ca_file=x&sslmode=prefer"},
	Password: redacttest.PasswordOf(parseURL, func(cfg *pgx.ConnConfig) string { return cfg.Password }),
}

// TestURLHostParam: without a host in the URL, libpq's host parameter
// names the server (a Unix socket's directory here), with or without a
// path.
func TestURLHostParam(t *testing.T) {
	for _, s := range []string{"postgres://?host=/tmp/pg", "postgres:///db?host=/tmp/pg", "postgres://u:pw@/db?host=%2Ftmp%2Fpg"} {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := parseURL(u)
		if err != nil {
			t.Errorf("%s: %v", s, err)
		} else if cfg.Host != "/tmp/pg" {
			t.Errorf("%s: host %q, want /tmp/pg", s, cfg.Host)
		}
	}
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
