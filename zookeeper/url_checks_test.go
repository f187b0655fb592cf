package zookeeper

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/turnstilelock/turnstile"

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
// else the URL gets wrong (extra is the rest of the query).
func FuzzPasswordFileRedacts(f *testing.F) {
	for i, extra := range []string{"", "session_timeout=0s", "x=1", "session_timeout=1s&session_timeout=2s", "password_file=/x"} {
		f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(i), "alice", extra)
	}
	f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(0), "a%3Ab", "")
	f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(0), "", "")
	f.Fuzz(func(t *testing.T, x, y []byte, sepIdx uint8, user, extra string) {
		secret, never := redacttest.Secret(x, y, redacttest.Separators[int(sepIdx)%len(redacttest.Separators)])
		if redacttest.Leak(extra, never) != "" || redacttest.Leak(user, never) != "" {
			return // the URL itself names the secret
		}
		path := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		raw := "zookeeper://" + user + "@127.0.0.1:1/app?password_file=" + url.QueryEscape(path)
		if extra != "" {
			raw += "&" + extra
		}
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		_, opts, err := parseURL(u)
		if err != nil {
			if leak := redacttest.ErrorLeak(err, never); leak != "" {
				t.Fatalf("parseURL(%q): error %q shows the password %q", raw, err, leak)
			}
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v, want ErrInvalidURL", raw, err)
			}
			return
		}
		var cfg config
		for _, o := range opts {
			if err := o(&cfg); err != nil {
				t.Fatalf("parseURL(%q) accepted an option that Dial refuses: %v", raw, err)
			}
		}
		if cfg.user != u.User.Username() || cfg.password != secret {
			t.Fatalf("parseURL(%q): user %q, password from the file read as %q", raw, cfg.user, cfg.password)
		}
	})
}
