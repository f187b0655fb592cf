package turnstile_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redact/redacttest"
)

// echoScheme is a backend whose driver repeats everything it was given
// in its error, as careless drivers do: Open must mask it all the same.
const echoScheme = "redactecho"

func init() {
	turnstile.Register(echoScheme, func(_ context.Context, u *url.URL, _ driver.OpenConfig) (driver.Backend, error) {
		pw, _ := u.User.Password()
		q := u.Query()
		return nil, fmt.Errorf("echo: cannot log in to %s as %s with password %s (sslpassword %s, token %s); dsn %s; opaque %s; fragment %s; path %s",
			u.Host, u.User.Username(), pw, q.Get("sslpassword"), q.Get("token"), u.String(), u.Opaque, u.Fragment, u.Path)
	})
}

// FuzzOpenRedacts opens URLs with a secret in every place a URL holds
// one, for every scheme Open knows, and checks that the secret shows
// nowhere in the error, and that the error still says what is wrong.
func FuzzOpenRedacts(f *testing.F) {
	f.Add([]byte("hunter2"), []byte("correcthorse"), uint8(0), uint8(0))
	for i := range redacttest.Separators {
		f.Add([]byte("s3cr3tPW"), []byte("batterystaple"), uint8(i), uint8(i))
		// '@' then sep: the password seems to end at the '@'.
		at := slices.Index(redacttest.Separators, "@")
		f.Add([]byte("s3cr3tPW!"), []byte("batterystaple"), redacttest.SepsIndex(at, i), uint8(0))
	}
	schemes := []string{echoScheme, "mem", "nosuchscheme", "redis", "postgres", "mysql", "etcd", "zookeeper", "redlock"}
	f.Fuzz(func(t *testing.T, a, b []byte, sepIdx, schemeIdx uint8) {
		scheme := schemes[int(schemeIdx)%len(schemes)]
		// Several separators, '@', '/', '?' and '#' among the choices.
		secret, never := redacttest.Secret(a, b, redacttest.Seps(sepIdx, a)...)
		for _, raw := range redacttest.URLs(scheme, "127.0.0.1:1", secret) {
			c, err := turnstile.Open(context.Background(), raw)
			if err == nil {
				// Only mem:// opens, and has nothing to leak into.
				if c.Close() != nil || !strings.HasPrefix(raw, "mem:") {
					t.Fatalf("Open(%q) succeeded", raw)
				}
				continue
			}
			msg := err.Error()
			if leak := redacttest.ErrorLeak(err, never); leak != "" {
				t.Fatalf("Open(%q): error %q shows the secret %q", raw, msg, leak)
			}
			if !errors.Is(err, turnstile.ErrInvalidURL) && !errors.Is(err, turnstile.ErrUnknownScheme) && !strings.Contains(msg, "echo: cannot log in") {
				t.Fatalf("Open(%q): error %q is no invalid URL, unknown scheme or driver error", raw, msg)
			}
			if !strings.HasPrefix(msg, "turnstile: ") || len(msg) < 30 {
				t.Fatalf("Open(%q): unclear error %q", raw, msg)
			}
		}
	})
}

// TestOpenRedactsReported covers the URLs that once showed their
// password.
func TestOpenRedactsReported(t *testing.T) {
	for _, raw := range []string{
		"redis:default:s3cr3tPW@127.0.0.1:16380",
		"//:s3cr3tPW@127.0.0.1:16380",
		"postgres://h/db?password=s3cr3tPW",
		"mysql:root:s3cr3tPW@127.0.0.1:3306/db",
		"postgres:u:s3cr3tPW@h/db",
		"etcd:u:s3cr3tPW@h",
		"zookeeper:u:s3cr3tPW@h",
		"redis://u:s3cr3tPW:x@h:abc",
		"redis://u:s3c#r3tPW@h",
		echoScheme + "://u:s3cr3tPW@h/db?password=s3cr3tPW",
		echoScheme + "://alice:s3cr3tPW@corp/2024@127.0.0.1:26379",
		echoScheme + "+sentinel://alice:s3cr3tPW@corp?2024@127.0.0.1:26379/m",
		echoScheme + "://127.0.0.1/0?pasword=s3cr3tPW",
	} {
		_, err := turnstile.Open(context.Background(), raw)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), "s3cr3tPW") || strings.Contains(err.Error(), "r3tPW") {
			t.Errorf("Open(%q) = %q: shows the password", raw, err)
		}
		t.Logf("%s", err)
	}
}

// TestOpenRefusesAmbiguousUserinfo: a URL whose password holds an '@'
// and then a '/', '?' or '#' unencoded has no clear end of its user
// information; Open refuses it before any backend sees it (the echo
// backend would repeat the pieces), with an error that names no part
// of it.
func TestOpenRefusesAmbiguousUserinfo(t *testing.T) {
	for _, raw := range redacttest.AmbiguousURLs(echoScheme, "127.0.0.1:26379", "/0") {
		_, err := turnstile.Open(context.Background(), raw)
		if !errors.Is(err, turnstile.ErrInvalidURL) || !errors.Is(err, redact.ErrAmbiguous) {
			t.Fatalf("Open(%q) = %v; want ErrInvalidURL, ambiguous", raw, err)
		}
		for _, piece := range []string{"hunter2", "corp", "2024", "echo:"} {
			if strings.Contains(err.Error(), piece) {
				t.Fatalf("Open(%q) = %q: shows %q", raw, err, piece)
			}
		}
	}
}
