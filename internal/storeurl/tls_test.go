package storeurl_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/storeurl"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

var errBad = errors.New("bad url")

// readTLS reads raw with the TLS parameters of a form that takes them
// and returns the configuration's error, or nil.
func readTLS(t *testing.T, raw string) (*storeurl.TLS, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	form := storeurl.Form{Schemes: []string{"x"}, Shape: "host", Invalid: errBad}
	var tl storeurl.TLS
	err = form.Read(u, func(r *storeurl.URL) error {
		if err := r.Params(tl.Params(map[string]storeurl.Param{})); err != nil {
			return err
		}
		_, err := tl.Config()
		return err
	})
	return &tl, err
}

func TestTLSConfig(t *testing.T) {
	s := testcerts.New(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")

	tl, err := readTLS(t, "x://h?ca_file="+s.CA+"&cert_file="+s.ClientCert+"&key_file="+s.ClientKey+"&server_name=db.example.com")
	if err != nil {
		t.Fatalf("good files: %v", err)
	}
	if tl.CAFile != s.CA || tl.ServerName != "db.example.com" || !tl.Given() {
		t.Fatalf("read %+v", tl)
	}
	cfg, err := tl.Config()
	if err != nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "db.example.com" || cfg.InsecureSkipVerify {
		t.Fatalf("Config() = %+v, %v", cfg, err)
	}
	if tl, err := readTLS(t, "x://h"); err != nil || tl.Given() {
		t.Fatalf("no parameters: %+v, %v", tl, err)
	}

	for _, c := range []struct{ query, want string }{
		{"ca_file=" + missing, `ca_file="` + missing + `": no such file or directory`},
		{"ca_file=" + notPEM, "no PEM certificate in the file"},
		{"ca_file=" + s.ClientKey, "no PEM certificate in the file"},
		{"ca_file=", `ca_file="" is empty`},
		{"cert_file=" + s.ClientCert, "cert_file without key_file"},
		{"key_file=" + s.ClientKey, "key_file without cert_file"},
		{"cert_file=" + s.ClientCert + "&key_file=" + missing, `key_file="` + missing + `": no such file or directory`},
		{"cert_file=" + s.ClientCert + "&key_file=" + s.ServerKey, "private key does not match public key"},
		{"cert_file=" + notPEM + "&key_file=" + s.ClientKey, "failed to find any PEM data in certificate input"},
		{"server_name=a:b", "is not a host name"},
		{"server_name=", "is not a host name"},
	} {
		_, err := readTLS(t, "x://h?"+c.query)
		if err == nil || !errors.Is(err, errBad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.query, err, c.want)
		}
	}
	if _, err := readTLS(t, "x://h?server_name=::1"); err != nil {
		t.Errorf("server_name=::1: %v", err)
	}

	// The key's content never shows in an error.
	key, err := os.ReadFile(s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Split(string(key), "\n")[1]
	for _, q := range []string{"ca_file=" + s.ClientKey, "cert_file=" + s.ClientKey + "&key_file=" + s.ClientKey, "cert_file=" + s.ClientCert + "&key_file=" + s.ServerKey} {
		if _, err := readTLS(t, "x://h?"+q); err == nil || strings.Contains(err.Error(), body) {
			t.Errorf("%s: error %v shows the key", q, err)
		}
	}
}

func TestRefuseWithout(t *testing.T) {
	tl := storeurl.TLS{CAFile: "a", ServerName: "b"}
	if err := tl.RefuseWithout("rediss://"); err == nil || err.Error() != "ca_file, server_name need TLS: use rediss://" {
		t.Fatalf("got %v", err)
	}
	tl = storeurl.TLS{KeyFile: "a"}
	if err := tl.RefuseWithout("rediss://"); err == nil || err.Error() != "key_file needs TLS: use rediss://" {
		t.Fatalf("got %v", err)
	}
	if err := (&storeurl.TLS{}).RefuseWithout("x"); err != nil {
		t.Fatal(err)
	}
}

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("pw", "s3cr3t-PW\n")
	read := func(raw string, users storeurl.Users) (*storeurl.URL, error) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		form := storeurl.Form{Schemes: []string{"x"}, Shape: "host", Users: users, Invalid: errBad}
		var got *storeurl.URL
		err = form.Read(u, func(r *storeurl.URL) error {
			got = r
			return r.Params(map[string]storeurl.Param{"db": storeurl.Store(new(string), storeurl.String)})
		})
		return got, err
	}
	r, err := read("x://alice@h?password_file="+good+"&db=3", storeurl.UserOptional)
	if err != nil || r.Username != "alice" || r.Password != "s3cr3t-PW" || r.Query().Has("password_file") || r.Query().Get("db") != "3" {
		t.Fatalf("got %+v, %v", r, err)
	}
	if r, err := read("x://h?password_file="+write("crlf", "pw\r\n"), storeurl.UserOptional); err != nil || r.Password != "pw" {
		t.Fatalf("CRLF: %+v, %v", r, err)
	}
	for _, c := range []struct {
		raw   string
		users storeurl.Users
		want  string
	}{
		{"x://alice:other@h?password_file=" + good, storeurl.UserOptional, "a password both in the URL and in password_file"},
		{"x://h?password_file=" + good, storeurl.UserRefused, "password_file: user information is not supported"},
		{"x://h?password_file=" + good + "&password_file=" + good, storeurl.UserOptional, "given 2 times"},
		{"x://h?password_file=" + write("empty", "\n"), storeurl.UserOptional, "is empty"},
		{"x://h?password_file=" + write("two", "a\nb\n"), storeurl.UserOptional, "has more than one line"},
		{"x://h?password_file=" + write("big", strings.Repeat("a", 70<<10)), storeurl.UserOptional, "is over 64 KiB"},
		{"x://h?password_file=" + filepath.Join(dir, "none"), storeurl.UserOptional, `password_file="` + filepath.Join(dir, "none") + `": no such file or directory`},
		{"x://h?password_file=" + dir, storeurl.UserOptional, "is a directory"},
	} {
		_, err := read(c.raw, c.users)
		if err == nil || !errors.Is(err, errBad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.raw, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error %v shows the password", c.raw, err)
		}
	}
}

// TestTLSSwitch: tls=on turns TLS on alone, a TLS parameter turns it on
// without tls=, and tls=off with a TLS parameter is a contradiction.
func TestTLSSwitch(t *testing.T) {
	for _, c := range []struct {
		query string
		on    bool
		err   string
	}{
		{"", false, ""},
		{"tls=on", true, ""},
		{"tls=1", true, ""},
		{"tls=off", false, ""},
		{"server_name=h", true, ""},
		{"tls=on&server_name=h", true, ""},
		{"tls=off&server_name=h", false, "tls=off, but server_name needs TLS: use tls=on, or leave tls out"},
		{"tls=maybe", false, `tls="maybe" is not on or off`},
	} {
		u, err := url.Parse("x://h?" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		var on bool
		form := storeurl.Form{Schemes: []string{"x"}, Shape: "host", Invalid: errBad}
		err = form.Read(u, func(r *storeurl.URL) error {
			var tl storeurl.TLS
			if err := r.Params(tl.SwitchParams(map[string]storeurl.Param{})); err != nil {
				return err
			}
			var err error
			on, err = tl.Enabled()
			return err
		})
		switch {
		case c.err == "" && (err != nil || on != c.on):
			t.Errorf("%s: Enabled = %v, %v; want %v", c.query, on, err, c.on)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.query, err, c.err)
		}
	}
}
