package redacttest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/redact"
)

// AmbiguousURLs are URLs of scheme whose password, hunter2@corp/2024 or
// the like, holds an '@' and then a '/', '?' or '#' unencoded: url.Parse
// would read "corp" as the host and the rest as a path, a query or a
// fragment. host is the host after the last '@', path what follows it.
func AmbiguousURLs(scheme, host, path string) []string {
	var out []string
	for _, cut := range []string{"/", "?", "#", "/x?y#"} {
		for _, user := range []string{"alice", ""} {
			out = append(out,
				scheme+"://"+user+":hunter2@corp"+cut+"2024@"+host+path,
				scheme+"://"+user+":hunter2"+cut+"2024@"+host+path,
			)
		}
	}
	return append(out,
		scheme+"://alice:hunter2@corp/2024@"+host+path+"?x=1",
		scheme+":alice:hunter2@corp/2024@"+host+path,
		"//alice:hunter2@corp/2024@"+host+path,
	)
}

// ambiguousPieces are the parts of the passwords of AmbiguousURLs.
var ambiguousPieces = []string{"hunter2", "corp", "2024"}

// CheckAmbiguous opens the AmbiguousURLs of each scheme and checks that
// Open refuses each with the backend's invalid-URL error and
// redact.ErrAmbiguous, naming no part of the password, and before any
// host name is looked up: a resolver that records every query stands in
// for the system's while it runs. The parser alone refuses them the
// same way.
func (b Backend) CheckAmbiguous(t *testing.T) {
	t.Helper()
	b = b.withDefaults()
	lookups := RecordLookups(t)
	for _, scheme := range b.Schemes {
		for _, raw := range AmbiguousURLs(scheme, b.Host, b.Path) {
			checkRefused(t, "Open", raw, b.openRefused(t, raw), b.InvalidURL)
			if u, perr := url.Parse(raw); perr == nil && strings.HasPrefix(raw, scheme+":") {
				checkRefused(t, "the parser", raw, b.Parse(u), b.InvalidURL)
			}
			if q := lookups(); len(q) > 0 {
				t.Fatalf("Open(%q) looked up %q", raw, q)
			}
		}
	}
}

// openRefused opens raw, within 5 s, and returns the error, failing t if
// it opens.
func (b Backend) openRefused(t *testing.T, raw string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := b.Open(ctx, raw)
	if err == nil {
		_ = c.Close()
		t.Fatalf("Open(%q) succeeded", raw)
	}
	return err
}

func checkRefused(t *testing.T, who, raw string, err, invalid error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s took %q", who, raw)
	case !errors.Is(err, invalid) || !errors.Is(err, redact.ErrAmbiguous):
		t.Fatalf("%s: %q: %v; want %v and %v", who, raw, err, invalid, redact.ErrAmbiguous)
	}
	if leak := ErrorLeak(err, ambiguousPieces); leak != "" {
		t.Fatalf("%s: %q: error %q shows %q", who, raw, err, leak)
	}
}

// RecordLookups makes every DNS query of the test's process go to a
// resolver that answers none and records the names asked for, until
// the test ends. The function returned reports the names asked for
// since it was last called.
func RecordLookups(t *testing.T) func() []string {
	var mu sync.Mutex
	var asked []string
	saved := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, address)
		return nil, errors.New("redacttest: no DNS")
	}}
	t.Cleanup(func() { net.DefaultResolver = saved })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		q := asked
		asked = nil
		return q
	}
}

// unknownValue is the value of the unknown parameters of
// CheckUnknownParams.
const unknownValue = "QJZVWKunknownQJZVWK"

// CheckUnknownParams opens, for each scheme, URLs with a query
// parameter the parser does not know — misspelt secrets (pasword=…) and,
// unless the backend has LooseParams, any name — and checks that the
// error names the parameter and shows its value nowhere, the URL it
// repeats included.
func (b Backend) CheckUnknownParams(t *testing.T) {
	t.Helper()
	b = b.withDefaults()
	names := []string{"pasword", "passowrd", "pssword", "Pasword", "ssl_pasword", "scret", "tokn"}
	if !b.LooseParams {
		names = append(names, "pw", "pw_main", "x", "sentinel")
	}
	user := ""
	if b.User != "" {
		user = b.User + "@"
	}
	for _, scheme := range b.Schemes {
		for _, name := range names {
			for _, value := range []string{unknownValue, url.QueryEscape(unknownValue + "@/?#%")} {
				raw := scheme + "://" + user + b.Host + b.Path + "?" + name + "=" + value
				err := b.openRefused(t, raw)
				if !errors.Is(err, b.InvalidURL) || !strings.Contains(err.Error(), `"`+name+`"`) {
					t.Fatalf("Open(%q) = %v; want %v naming %q", raw, err, b.InvalidURL, name)
				}
				if strings.Contains(err.Error(), "QJZVWK") {
					t.Fatalf("Open(%q): error %q shows the value", raw, err)
				}
			}
		}
	}
}
