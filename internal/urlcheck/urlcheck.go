// Package urlcheck checks what the URL parser of a lock store reads: the
// frame of a fuzz target that parses URLs and writes back what it read,
// the addresses a parser dials, and the TLS settings it makes.
package urlcheck

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// Parser names what the fuzz target of one store's URL parser needs: the
// parser, which reads the driver's settings D and the backend's options O
// from a URL; how the options make the backend's configuration C; and
// how to check what was read and write it back as a URL.
type Parser[D, O, C any] struct {
	// Parse is the store's URL parser.
	Parse func(*url.URL) (D, O, error)
	// Apply applies the options to the backend's default configuration.
	Apply func(O) (C, error)
	// Check fails t unless the settings read from raw, which url.Parse
	// read as u, are usable.
	Check func(t *testing.T, raw string, u *url.URL, d D, c C)
	// Refused, if set, checks an error of Parse, which wraps
	// turnstile.ErrInvalidURL.
	Refused func(t *testing.T, raw string, u *url.URL, err error)
	// Format, if set, writes the settings read from u back as a URL; the
	// target then checks that it parses to the same settings: those for
	// which Differ reports false.
	Format func(u *url.URL, d D, c C) string
	Differ func(d D, c C, d2 D, c2 C) bool
}

// Fuzz adds seeds to f and fuzzes p.Parse with them and with what the
// fuzzer makes of them, each that url.Parse reads: Parse never panics,
// and refuses what it cannot use with turnstile.ErrInvalidURL; the
// options of what it accepts apply, and p.Check accepts the settings;
// and the URL p.Format writes back from them parses to the same
// settings.
func (p Parser[D, O, C]) Fuzz(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return // Open refuses it before any backend sees it
		}
		d, c, err := p.read(t, u)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("parseURL(%q) = %v; want ErrInvalidURL", raw, err)
			}
			if p.Refused != nil {
				p.Refused(t, raw, u, err)
			}
			return
		}
		p.Check(t, raw, u, d, c)
		if p.Format == nil {
			return
		}
		back := p.Format(u, d, c)
		u2, err := url.Parse(back)
		if err != nil {
			t.Fatalf("parseURL(%q) read settings that %q writes back, which does not parse: %v", raw, back, err)
		}
		d2, c2, err := p.read(t, u2)
		if err != nil {
			t.Fatalf("parseURL(%q) read settings that %q writes back, which it refuses: %v", raw, back, err)
		}
		if p.Differ(d, c, d2, c2) {
			t.Fatalf("%q and its settings written back as %q parse differently", raw, back)
		}
	})
}

// read parses u and applies the options read, failing t if they fail.
func (p Parser[D, O, C]) read(t *testing.T, u *url.URL) (D, C, error) {
	t.Helper()
	var c C
	d, o, err := p.Parse(u)
	if err != nil {
		return d, c, err
	}
	c, err = p.Apply(o)
	if err != nil {
		t.Fatalf("parseURL(%q) accepted options that fail: %v", u, err)
	}
	return d, c, nil
}

// CheckHostPorts fails t unless each of addrs, the what of a URL raw
// (server, node address…), is host:port with a host, no brackets left
// around it, and a port from 1 to 65535.
func CheckHostPorts(t *testing.T, raw, what string, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || strings.ContainsAny(host, "[]") {
			t.Fatalf("parseURL(%q): %s %q is not host:port (%v)", raw, what, a, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			t.Fatalf("parseURL(%q): %s %q has port %q", raw, what, a, port)
		}
	}
}

// SetTLS sets in q, a query written back from settings read, the
// parameters that make TLS configuration cfg again: tls=on, and its
// server name where it has one. The files of the TLS parameters were
// read; what they held is not written back.
func SetTLS(q url.Values, cfg *tls.Config) {
	if cfg == nil {
		return
	}
	q.Set("tls", "on")
	if cfg.ServerName != "" {
		q.Set("server_name", cfg.ServerName)
	}
}

// TLSSeeds returns seeds of a parser of URLs with TLS parameters: each of
// bases (a URL up to its '?' included) followed by each query that names
// the files of c in the TLS parameters, as they mean and otherwise (a
// key as the CA, the CA as a password file), and by each of queries.
func TLSSeeds(c *testcerts.Set, bases []string, queries ...string) []string {
	var seeds []string
	for _, q := range append([]string{
		"ca_file=" + c.CA, "cert_file=" + c.ClientCert + "&key_file=" + c.ClientKey, "cert_file=" + c.ClientCert,
		"key_file=" + c.ClientKey, "ca_file=" + c.ClientKey, "server_name=a:b", "password_file=" + c.CA,
	}, queries...) {
		for _, b := range bases {
			seeds = append(seeds, b+q)
		}
	}
	return seeds
}

// QueryFiles returns the files of c that URLs name, the CA's, the client
// certificate's and its key's, escaped for a query.
func QueryFiles(c *testcerts.Set) (ca, cert, key string) {
	return url.QueryEscape(c.CA), url.QueryEscape(c.ClientCert), url.QueryEscape(c.ClientKey)
}

// TLSParamGiven reports whether q sets one of the TLS parameters.
func TLSParamGiven(q url.Values) bool {
	for _, p := range storeurl.TLSParamNames {
		if q.Has(p) {
			return true
		}
	}
	return false
}

// TLSCase is a URL and the TLS settings its parser must make of it.
type TLSCase struct {
	Raw string
	// TLS is set where the URL turns TLS on.
	TLS bool
	// ServerName is the name the server is verified under: "" for the
	// host dialled.
	ServerName string
	// OwnCA is set where the server is verified against the roots of
	// ca_file rather than the system's.
	OwnCA bool
	// ClientCert is set where the client presents a certificate.
	ClientCert bool
}

// CheckTLS parses the URL of each case with parse, which returns the TLS
// configuration the driver gets (nil for none) and whether it dials
// through a hook of its own, and checks that TLS is on as the case says,
// through the hook, always verifying the server at TLS 1.2, under the
// case's server name, against the case's roots, presenting a client
// certificate as the case says.
func CheckTLS(t *testing.T, parse func(*url.URL) (*tls.Config, bool, error), cases []TLSCase) {
	t.Helper()
	for _, c := range cases {
		u, err := url.Parse(c.Raw)
		if err != nil {
			t.Fatal(err)
		}
		cfg, hook, err := parse(u)
		if err != nil {
			t.Errorf("parseURL(%s): %v", c.Raw, err)
			continue
		}
		if (cfg != nil) != c.TLS || hook != c.TLS {
			t.Errorf("parseURL(%s): TLS %v, dial hook %v; want TLS %v", c.Raw, cfg != nil, hook, c.TLS)
			continue
		}
		if cfg == nil {
			continue
		}
		if cfg.InsecureSkipVerify || cfg.MinVersion != tls.VersionTLS12 {
			t.Errorf("parseURL(%s): InsecureSkipVerify %v, MinVersion %x", c.Raw, cfg.InsecureSkipVerify, cfg.MinVersion)
		}
		if cfg.ServerName != c.ServerName {
			t.Errorf("parseURL(%s): ServerName %q, want %q", c.Raw, cfg.ServerName, c.ServerName)
		}
		if (cfg.RootCAs != nil) != c.OwnCA {
			t.Errorf("parseURL(%s): own roots %v, want %v", c.Raw, cfg.RootCAs != nil, c.OwnCA)
		}
		if (len(cfg.Certificates) == 1) != c.ClientCert {
			t.Errorf("parseURL(%s): %d client certificates", c.Raw, len(cfg.Certificates))
		}
	}
}
